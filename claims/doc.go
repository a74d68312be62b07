// Package claims is the race-free registry of listener tuples, the stage of
// the data path between rules and webhook (api → rules → claims → webhook):
// one Lease per (Gateway, tuple) in gatefold's namespace, its codec, the Store
// that checks, acquires and releases an admission request's claims, this
// replica's claim Informer, its record of how it judged each claim
// (sightings), and the leader's collector that releases unwanted claims and
// backfills missing ones.
//
// It imports api/v1alpha1, rules and client-go/controller-runtime. It answers
// in rules' terms (a rules.Conflict per listener), never in field errors; it
// never writes Gateways or fragments, and never imports webhook or merger. Why
// it is race-free: docs/architecture.md, "Claims".
package claims
