// Package claims is the race-free registry of listener tuples: one Lease per
// (Gateway, tuple) in gatefold's namespace, its codec, the store that checks,
// acquires and releases claims for an admission request, this replica's
// informer of the claims, its record of how it judged each (sightings), and
// the leader's collector that releases unwanted claims and backfills missing
// ones. It answers in rules' terms (a rules.Conflict per listener), never in
// admission's field errors; it never writes Gateways or fragments, and never
// imports webhook or merger.
package claims
