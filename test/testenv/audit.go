package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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

// Replica is the gatefold replica the request's user agent names,
// "gatefold/<version> (<replica>)", or "" for another client.
func (e AuditEvent) Replica() string {
	if !strings.HasPrefix(e.UserAgent, "gatefold/") {
		return ""
	}
	i, j := strings.Index(e.UserAgent, "("), strings.Index(e.UserAgent, ")")
	if i < 0 || j < i {
		return ""
	}
	return e.UserAgent[i+1 : j]
}

// ReadAuditLog returns the events of an audit log, one JSON event a line.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	events, _, err := ReadAuditLogFrom(path, 0)
	return events, err
}

// ReadAuditLogFrom returns the events of the whole lines an audit log holds
// past offset, and the offset after them: a line still being written is
// left for the next read, so a log that grows can be read as it grows.
func ReadAuditLogFrom(path string, offset int64) ([]AuditEvent, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	var events []AuditEvent
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return events, offset, nil
		}
		if err != nil {
			return nil, offset, err
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, offset, fmt.Errorf("reading the audit log %s: %w", path, err)
		}
		offset += int64(len(line))
		events = append(events, e)
	}
}
