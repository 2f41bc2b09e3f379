package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
)

type operatorKey struct{}

// verified stands in for the service's authentication middleware: it
// puts the login it checked into the request's context, where the
// handler's WithOperator function finds it.
func verified(login string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), operatorKey{}, login)))
	})
}

func loginFromContext(r *http.Request) (string, error) {
	login, _ := r.Context().Value(operatorKey{}).(string)
	return login, nil
}

// Without WithOperator the body's "by" is whatever the sender typed, so
// an operator could settle a payment in a colleague's name. With it, the
// audit trail names the login the service verified.
func TestResolveRecordsTheVerifiedOperator(t *testing.T) {
	for name, tc := range map[string]struct {
		claimed string
		want    string
	}{
		"claims someone else": {`"by":"mallory",`, "alice (said mallory)"},
		"claims nobody":       {``, "alice"},
		"claims themselves":   {`"by":"alice",`, "alice"},
		"claim too long":      {`"by":"` + strings.Repeat("m", 250) + `",`, "alice"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.admin.Close()
			f.admin = httptest.NewServer(verified("alice", admin.NewHandler(f.client, admin.WithClock(f.clock), admin.WithOperator(loginFromContext))))
			t.Cleanup(f.admin.Close)

			body := `{"key":"lost","state":"succeeded",` + tc.claimed + `"reason":"seen in the dashboard"}`
			require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil))
			rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, rec.State)
			require.Equal(t, tc.want, rec.Resolved.By)
		})
	}
}

// A request the service cannot put a name to is refused before anything
// is written: an unnamed manual settlement is what WithOperator is there
// to prevent.
func TestResolveRefusedWithoutAnOperator(t *testing.T) {
	for name, who := range map[string]func(*http.Request) (string, error){
		"error":       func(*http.Request) (string, error) { return "", errors.New("session expired") },
		"empty":       func(*http.Request) (string, error) { return "  ", nil },
		"unprintable": func(*http.Request) (string, error) { return "alice\nroot", nil },
		"too long":    func(*http.Request) (string, error) { return strings.Repeat("a", 256), nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.admin.Close()
			f.admin = httptest.NewServer(admin.NewHandler(f.client, admin.WithClock(f.clock), admin.WithOperator(who)))
			t.Cleanup(f.admin.Close)

			var ans struct{ Error admin.Error }
			body := `{"key":"lost","state":"failed","reason":"refunded","by":"alice"}`
			require.Equal(t, http.StatusForbidden, f.do(http.MethodPost, "/resolve", body, &ans))
			require.Equal(t, "forbidden", ans.Error.Code)
			require.Contains(t, ans.Error.Message, "WithOperator")
			rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, rec.State, "nothing written")
			require.Nil(t, rec.Resolved)
		})
	}
}
