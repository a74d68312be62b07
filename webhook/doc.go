// Package webhook is admission, the last stage of the admission path
// (api → rules → claims → webhook): the mutating webhook defaults and
// normalises ListenerFragments, the fragment validator denies before anything
// is stored a listener its Gateway could not take, and the Gateway validator
// warns a Gateway's owner of its listeners' conflicts with fragments.
//
// It imports api/v1alpha1, rules (the answers), claims (race-free
// duplicates) and internal/manager (the parent index), and turns their answers into field errors; it is the only
// package that speaks field.ErrorList. It reads Gateways from the informer
// cache and never writes them, and never imports merger.
package webhook
