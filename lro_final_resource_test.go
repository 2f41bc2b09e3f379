package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// decodeOperationMonitor reads a long-running operation's status monitor
// as Microsoft Graph's richLongRunningOperation has it
// (learn.microsoft.com/graph/api/resources/richlongrunningoperation: "id"
// the operation's, "status" notStarted, running, succeeded or failed, and
// once it succeeded "resourceId" and "resourceLocation", the resource it
// made): the operation while it runs, the resource once made, which is
// what the caller asked for.
func decodeOperationMonitor(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		ResourceID string `json:"resourceId"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch strings.ToLower(v.Status) {
	case "notstarted", "running":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.ID}, nil
	case "succeeded":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.ResourceID}, nil
	case "failed":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.ID, Reason: "failed"}, nil
	}
	return idem.Outcome{}, fmt.Errorf("operation status %q", v.Status)
}

// decodeEnvelopedMonitor is decodeOperationMonitor of the object a
// body's "data" member holds, or of the body when it has none.
func decodeEnvelopedMonitor(a *idem.Answer) (idem.Outcome, error) {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(a.Body, &env) == nil && len(env.Data) > 0 {
		inner := *a
		inner.Body = env.Data
		return decodeOperationMonitor(&inner)
	}
	return decodeOperationMonitor(a)
}

// A status monitor names its operation while it runs and, once it
// succeeded, the resource the operation made: the two ids differ. The
// operation's id, held from the processing answers, made the resource's
// look like a second one made for the key (ReviewMadeTwice), and the
// operation that succeeded once was left to a person. Now an answer that
// still names the held operation as its own id is that operation's
// result: it settles with the resource. A final answer whose own id is
// not the held one still flags the key made twice.
func TestOperationMonitorFinalResourceIsNotMadeTwice(t *testing.T) {
	for _, tt := range []struct {
		name     string
		finished string
		state    idem.State
		resource string
		review   string
	}{
		{name: "the operation's monitor names the resource it made",
			finished: `{"id":"k","status":"succeeded","createdDateTime":"2026-11-29T12:00:00Z","resourceId":"site-1",` +
				`"resourceLocation":"https://graph.microsoft.com/v1.0/sites/site-1"}`,
			state: idem.StateSucceeded, resource: "site-1"},
		// Modelled: the same monitor in a lone "data" envelope, as
		// DecodeJSON reads one (Circle's {"data":{"id":…,"status":…}},
		// developers.circle.com/api-reference/circle-mint/payments/create-payment).
		{name: "the operation's monitor in a data envelope",
			finished: `{"data":{"id":"k","status":"succeeded","resourceId":"site-1"}}`,
			state:    idem.StateSucceeded, resource: "site-1"},
		{name: "another operation's monitor names another resource",
			finished: `{"id":"k2","status":"succeeded","resourceId":"site-2","resourceLocation":"https://graph.microsoft.com/v1.0/sites/site-2"}`,
			state:    idem.StateSucceeded, resource: "site-2", review: idem.ReviewMadeTwice},
		// The envelope is looked into for the held id only: another
		// operation's monitor in it is still another operation's.
		{name: "another operation's monitor in a data envelope",
			finished: `{"data":{"id":"k2","status":"succeeded","resourceId":"site-2"}}`,
			state:    idem.StateSucceeded, resource: "site-2", review: idem.ReviewMadeTwice},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &lroService{started: map[string]bool{}, initial: http.StatusAccepted, running: "running", finished: tt.finished}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Operation-Id", idem.KeyBare),
				idem.WithResultEndpoint("/operations/{key}"), idem.WithDecoder(decodeEnvelopedMonitor))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/sites:create", Body: []byte(`{"displayName":"Team"}`)})
			op, lerr := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, lerr)
			// Settled with the resource either way; two made is a flag
			// kept beside the outcome, for a person.
			require.NoError(t, err)
			require.Equal(t, tt.state, res.State)
			require.Equal(t, tt.resource, res.ResourceID)
			require.Equal(t, tt.review, res.Review)
			require.Equal(t, tt.state, op.State)
			require.Equal(t, tt.review, op.Review)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, []string{"running", "running", "end"}, s.polled, "polled until the final word")
			require.Equal(t, []string{"k"}, s.submits, "one submit, its Operation-Id the key")
		})
	}
}
