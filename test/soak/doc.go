// Package soak runs gatefold as installed under random operations and
// injected faults and checks its promises against an oracle of its own.
//
// The oracle (quiescent, monitor) reads the docs' rules, not gatefold's
// packages, and relies on the workload's conventions:
//   - Gateways live in namespace infra, of class soak (controllerName
//     example.com/soak, whose ListenerSets gatefold folds) or plain; their
//     own listeners are named own-*; pool heads carry gatefold.dev/pool.
//   - Tenants are namespaces t0 to t5; t5 may opt out of admission, and each
//     carries soak.gatefold.dev/access, which Selector allowedListeners read.
//   - Secret shared-cert lives in namespace certs; grants there named
//     grant-<tenant> let one tenant's fragments and ListenerSets use it.
//   - No Gateway implementation runs: no withdrawals, Programmed Unknown.
//
// docs/soak.md says what runs, the faults, and how to replay a seed.
package soak
