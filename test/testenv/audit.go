package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests and
// benchmarks read from the log Options.AuditLog asks for.
type AuditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	// RequestReceivedTimestamp is when the API server received the request.
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	// RequestObject is the object written, at level Request and above
	// (devenv.Options.AuditRouteStatusBodies); nil otherwise.
	RequestObject json.RawMessage `json:"requestObject"`
}

// Username is the user the request acted as: the one it impersonated, if
// any (a gatefold process Start runs impersonates its ServiceAccount), else
// the one who sent it.
func (e AuditEvent) Username() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// ReadAuditLog returns the events of an audit log, one JSON event a line.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading the audit log %s: %w", path, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}
