package v1alpha1

// FragmentConditionType is a type of condition on a ListenerFragment.
type FragmentConditionType string

// FragmentConditionReason explains a ListenerFragment condition.
type FragmentConditionReason string

const (
	// FragmentConditionAccepted is True when the fragment attaches to its
	// Gateway and at least one of its listeners was folded.
	FragmentConditionAccepted FragmentConditionType = "Accepted"

	// FragmentConditionProgrammed is True when the Gateway implementation
	// reports every folded listener of the fragment as programmed.
	FragmentConditionProgrammed FragmentConditionType = "Programmed"
)

const (
	// FragmentReasonAccepted is used with Accepted=True.
	FragmentReasonAccepted FragmentConditionReason = "Accepted"

	// FragmentReasonNotAllowed is used with Accepted=False when the Gateway's
	// allowedListeners does not admit the fragment's namespace.
	FragmentReasonNotAllowed FragmentConditionReason = "NotAllowed"

	// FragmentReasonParentNotAccepted is used with Accepted=False when the
	// parent Gateway does not exist or is not accepted.
	FragmentReasonParentNotAccepted FragmentConditionReason = "ParentNotAccepted"

	// FragmentReasonListenersNotValid is used with Accepted=False when none of
	// the fragment's listeners could be folded.
	FragmentReasonListenersNotValid FragmentConditionReason = "ListenersNotValid"

	// FragmentReasonTooManyListeners is used with Accepted=False when the
	// fragment's listeners did not fit in the Gateway's 64 listeners.
	FragmentReasonTooManyListeners FragmentConditionReason = "TooManyListeners"

	// FragmentReasonProgrammed is used with Programmed=True.
	FragmentReasonProgrammed FragmentConditionReason = "Programmed"

	// FragmentReasonPending is used with Unknown conditions before gatefold or
	// the Gateway implementation has reported.
	FragmentReasonPending FragmentConditionReason = "Pending"

	// FragmentReasonDeleting is used with Accepted=False and Programmed=False
	// on a fragment being deleted (a finalizer holds it), and on each of its
	// listeners: gatefold has withdrawn them from the Gateway.
	FragmentReasonDeleting FragmentConditionReason = "Deleting"

	// FragmentReasonWithdrawn is used with a listener's Programmed=False when
	// the Gateway implementation refused the folded listener and gatefold
	// withdrew it from the Gateway, so that the Gateway's other listeners
	// stay accepted.
	FragmentReasonWithdrawn FragmentConditionReason = "Withdrawn"

	// FragmentReasonInvalid is used when the fragment cannot be folded as
	// written.
	FragmentReasonInvalid FragmentConditionReason = "Invalid"
)

// Route conditions gatefold writes.
const (
	// RouteConditionDerived, domain-prefixed as upstream allows for
	// implementation-specific types, is True on every status.parents entry
	// gatefold writes on a route for a ListenerFragment or ListenerSet
	// parentRef: it marks the entry as gatefold's, which serves the parentRef
	// through derived routes. gatefold removes entries that carry it, and
	// only those, when their parentRef is no longer its to serve.
	RouteConditionDerived = "gatefold.dev/Derived"

	// RouteReasonDerived is used with RouteConditionDerived=True.
	RouteReasonDerived = "DerivedRoutes"
)
