package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// The remote mode (-url) reads and resolves operations through a running
// service's admin handler (package admin) instead of a stopped journal
// file. Each command formats what it gets exactly as in file mode; the
// handler never serves bodies or headers, so show says so instead.

// maxRemoteAnswer bounds an answer read from the handler.
const maxRemoteAnswer = 64 << 20

// maxRemoteMessage bounds, in characters, the handler's error message
// the command prints: the handler's own are a line or two.
const maxRemoteMessage = 512

// remoteTimeout bounds one request to the handler.
const remoteTimeout = 30 * time.Second

// remote is a client of the admin handler at base.
type remote struct {
	e    *env
	base *url.URL
	hc   *http.Client
}

func (e *env) remote(cmd string) (*remote, error) {
	// Never quote the flag as given: it may carry a password, and the
	// message goes to a terminal or a CI log.
	u, err := url.Parse(e.url)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Parse's own error quotes the whole URL
		}
		return nil, usagef(cmd, "-url is not a valid URL (%v): want the admin handler's base URL, such as https://svc.internal/idem/", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef(cmd, "-url %q: want the admin handler's base URL, such as https://svc.internal/idem/", shownURL(u))
	}
	// net/http sends the -url's user information as HTTP Basic
	// authorization when no Authorization header is set (RFC 7617).
	credential := ""
	switch {
	case e.getenv("IDEM_AUTHORIZATION") != "":
		credential = "IDEM_AUTHORIZATION"
	case u.User != nil:
		credential = "the user name and password in it (sent as Basic authorization)"
	}
	if u.Scheme == "http" && credential != "" && !e.allowHTTP && !direct(u) {
		// The credential opens the service's admin handler, which can
		// settle payments by hand: in clear text, anyone on the path
		// could replay it.
		return nil, usagef(cmd, "-url %s is plain http to another host: %s would cross the network in clear text. "+
			"Use https://, or reach the handler through this machine (kubectl port-forward, an SSH tunnel: http://127.0.0.1:PORT/...), "+
			"or pass -allow-http if the network encrypts the hop itself (a service mesh's mutual TLS)", shownURL(u), credential)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	// No redirect is followed: net/http sends Authorization on to any URL
	// of the same host name, an http:// one or another port included.
	hc := &http.Client{Timeout: remoteTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &remote{e: e, base: u, hc: hc}, nil
}

// direct reports whether a request to u goes straight to this machine,
// and so never crosses a network: u names it, and net/http will not send
// the request through a proxy ($HTTP_PROXY), which it does for
// "LOCALHOST" or "localhost." (its proxy rules exempt only "localhost" as
// written and loopback addresses). The client's transport is
// http.DefaultTransport, whose Proxy is http.ProxyFromEnvironment.
func direct(u *url.URL) bool {
	if !loopback(u.Hostname()) {
		return false
	}
	p, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err == nil && p == nil
}

// shownURL is u as messages and stats -json show it: without its user
// name and password (a user name alone may be a token) or a credential
// in its query.
func shownURL(u *url.URL) string { return httpsyntax.RedactURL(u.String()) }

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// call sends one request and decodes the JSON answer into out. member is
// a member every answer of the handler's at path holds: a 200 answer
// without it is another service's, such as the one a -url without the
// handler's mount path reaches (a ServeMux's "/" matches every path), and
// is an error, never read as an empty list or a write done.
func (r *remote) call(ctx context.Context, method, path string, q url.Values, body any, member string, out any) error {
	u := r.base.ResolveReference(&url.URL{Path: path, RawQuery: q.Encode()})
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The handler sits behind the service's own authentication.
	if a := r.e.getenv("IDEM_AUTHORIZATION"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		// Its text quotes the URL as net/http shows it, with the user
		// name (a token, as the user name of a Basic credential) left in.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = fmt.Errorf("%s %s: %w", ue.Op, path, ue.Err)
		}
		return fmt.Errorf("admin handler %s: %w", shownURL(r.base), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRemoteAnswer))
	if err != nil {
		return fmt.Errorf("admin handler %s: %w", shownURL(r.base), err)
	}
	if loc, err := resp.Location(); err == nil && resp.StatusCode/100 == 3 {
		return fmt.Errorf("admin handler %s: %s to %s, not followed (it would take IDEM_AUTHORIZATION along); if that is the handler, pass it as -url",
			shownURL(r.base), resp.Status, loc.Redacted())
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error admin.Error }
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			// The operator's terminal prints it: a service that is not the
			// handler (a wrong -url) may send anything, of any length.
			return fmt.Errorf("%s (admin handler %s, %d)", clean(truncate(e.Error.Message, maxRemoteMessage)), shownURL(r.base), resp.StatusCode)
		}
		return fmt.Errorf("admin handler %s: %s; check -url (it should end in the handler's mount path, such as /idem/) and IDEM_AUTHORIZATION",
			shownURL(r.base), resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("admin handler %s: the answer is not the handler's JSON (%v); check -url", shownURL(r.base), err)
	}
	// Not an object (an array, null): members stays empty.
	var members map[string]json.RawMessage
	_ = json.Unmarshal(b, &members)
	if _, ok := members[member]; !ok {
		return notHandlers(r, path, member)
	}
	return nil
}

// notHandlers is the error for an answer to path that is not the admin
// handler's answer: it lacks member, which the handler's always holds.
func notHandlers(r *remote, path, member string) error {
	return fmt.Errorf("admin handler %s: the answer to %s is not the admin handler's answer (it has no %q), so it is not taken as one: "+
		"check -url (it should end in the handler's mount path, such as /idem/)", shownURL(r.base), path, member)
}

// List reads every operation f selects, page after page.
func (r *remote) List(ctx context.Context, f journal.Filter, olderThan time.Duration, scope string) ([]*journal.Record, error) {
	q := url.Values{"limit": {fmt.Sprint(admin.MaxLimit)}, "timeline": {"true"}}
	if len(f.States) > 0 {
		ss := make([]string, len(f.States))
		for i, s := range f.States {
			ss[i] = string(s)
		}
		q.Set("state", strings.Join(ss, ","))
	}
	if f.Review {
		q.Set("flagged", "true")
	}
	if olderThan > 0 {
		q.Set("older_than", olderThan.String())
	}
	if scope != "" {
		q.Set("scope", scope)
	}
	var recs []*journal.Record
	for {
		var p admin.Page
		if err := r.call(ctx, http.MethodGet, "operations", q, nil, "operations", &p); err != nil {
			return nil, err
		}
		for _, op := range p.Operations {
			recs = append(recs, op.Record())
		}
		if p.Next == "" {
			return recs, nil
		}
		q.Set("cursor", p.Next)
	}
}

func (r *remote) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	var op admin.Operation
	if err := r.call(ctx, http.MethodGet, "operation", url.Values{"scope": {scope}, "key": {key}}, nil, "key", &op); err != nil {
		return nil, err
	}
	return op.Record(), nil
}

func (r *remote) Stats(ctx context.Context) (journal.Stats, error) {
	var st admin.Stats
	if err := r.call(ctx, http.MethodGet, "stats", nil, nil, "by_state", &st); err != nil {
		return journal.Stats{}, err
	}
	out := journal.Stats{ByState: map[journal.State]int{}, Open: st.Open, Review: st.Review, Total: st.Total, Newer: st.Newer, NewerOpen: st.NewerOpen}
	for s, n := range st.ByState {
		out.ByState[journal.State(s)] = n
	}
	return out, nil
}

func (r *remote) Resolve(ctx context.Context, scope, key string, m journal.Manual, force bool) (*journal.Record, journal.State, error) {
	var ans admin.ResolveAnswer
	err := r.call(ctx, http.MethodPost, "resolve", nil, admin.ResolveRequest{
		Scope: scope, Key: key, State: string(m.State), ResourceID: m.ResourceID, Reason: m.Reason, By: m.By, Force: force,
	}, "operation", &ans)
	if err != nil {
		return nil, "", err
	}
	if ans.Operation == nil {
		return nil, "", notHandlers(r, "resolve", "operation")
	}
	return ans.Operation.Record(), journal.State(ans.From), nil
}

// Where is the handler's URL, without a password.
func (r *remote) Where() string { return shownURL(r.base) }

// Heading names the service, whose file size the handler does not serve.
func (r *remote) Heading(journal.Stats) string { return "service " + clean(r.Where()) }

// Close has nothing to release: each request is its own.
func (r *remote) Close() error { return nil }
