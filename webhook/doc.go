// Package webhook admits ListenerFragments: it defaults and normalises them,
// and denies, before anything is stored, a listener that the Gateway could
// not take. Duplicate decisions are race-free through package claims,
// whose conflicts it turns into field errors.
// It reads Gateways and never writes them: folding is the merger's job.
package webhook
