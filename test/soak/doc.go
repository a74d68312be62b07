// Package soak runs gatefold as installed under random operations and
// injected faults and checks its promises against an oracle of its own.
package soak
