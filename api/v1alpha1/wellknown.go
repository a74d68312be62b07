package v1alpha1

// Names users see on objects gatefold reads or writes.
const (
	// FieldManager is the field manager of everything gatefold applies: the
	// Gateway listeners it folds, fragment and ListenerSet statuses, and
	// ReferenceGrants. managedFields name it.
	FieldManager = "gatefold"

	// ManagedByLabel, the well-known label of the tool that manages an
	// object, is FieldManager on the objects gatefold makes: ReferenceGrants,
	// derived routes, its CA's Secret.
	ManagedByLabel = "app.kubernetes.io/managed-by"

	// PoolAnnotation, set to "true" by its owner on a Gateway, makes the
	// Gateway the head of a pool: when its fragments do not fit in one
	// Gateway, gatefold creates sibling Gateways from it and places each
	// fragment whole on one Gateway of the pool.
	PoolAnnotation = "gatefold.dev/pool"

	// PoolLabel on a sibling names its head, which also controls it (an
	// ownerReference): a label alone does not make a Gateway a sibling.
	// Past 63 characters the value is the head's first 46 and a hash.
	PoolLabel = "gatefold.dev/pool-head"

	// HeadSpecAnnotation on a sibling is a digest of the head's spec, as
	// stored, that gatefold wrote the sibling from: a head's change to a
	// field gatefold's Go types lack reaches its siblings too.
	HeadSpecAnnotation = "gatefold.dev/head-spec"

	// DerivedLabel, set to "true", marks a route gatefold derived from a
	// user's route that names a ListenerFragment or a ListenerSet: it names
	// the Gateways the parent's listeners landed on, and gatefold reverts
	// every edit of it. GitOps tools should ignore objects carrying it.
	DerivedLabel = "gatefold.dev/derived"

	// DerivedFromLabel on a derived route is a hash of the kind, namespace
	// and name of the user's route it was derived from, which also controls
	// it (an ownerReference).
	DerivedFromLabel = "gatefold.dev/derived-from"

	// DerivedSourceAnnotation on a derived route names the user's route,
	// <Kind>/<name>, in the same namespace.
	DerivedSourceAnnotation = "gatefold.dev/derived-source"

	// DerivedNoteAnnotation on a derived route tells whoever opens it to
	// edit the user's route instead: gatefold reverts edits of it.
	DerivedNoteAnnotation = "gatefold.dev/note"

	// SourceGenerationAnnotation on a derived route is the generation of
	// the user's route its spec was copied from.
	SourceGenerationAnnotation = "gatefold.dev/source-generation"
)
