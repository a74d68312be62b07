// Package testenv is what gatefold's tests and the bench share on a real
// control plane:
//   - Start (MustStart in a test) runs gatefold replicas, in process or as
//     the binary, as the ServiceAccount an overlay ships (Install), and
//     reports a replica that ends early;
//   - Eventually and Poll wait for a check; Holds watches objects for a
//     window, Steady probes what has no watch;
//   - CheckPool and WaitAccepted are the assertions several packages make;
//   - the audit-log reader, Kubectl, PointWebhooksAt, and Logs, which fail a
//     test for every request the API server refused gatefold.
package testenv
