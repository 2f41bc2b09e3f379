package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// Budget and timing defaults. The package documentation has them in one table.
const (
	DefaultMaxAttempts    = 5
	DefaultMaxElapsed     = 60 * time.Second
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultKeyRetention is the key window idem assumes when it knows
	// no better: shorter than common servers' defaults, so that it never
	// resends a key a server may have forgotten. The shortest common
	// default found is 30 min (the Idempotency middleware of the Fiber Go
	// framework, Lifetime, counted from when it stores the response); 20
	// min, resent until 18 (KeyWindowMargin), leaves room for an unknown
	// server's window being shorter still. Some APIs' windows are shorter
	// than this: DynamoDB's TransactWriteItems token lives 10 min
	// (KeyRetentionDynamoDB), Helcim's Payment API keys 5 min
	// (KeyRetentionHelcim), Authorize.Net's duplicate window 2 min
	// (KeyRetentionAuthorizeNet); name such a window, or idem resends a
	// key the server has forgotten. Name
	// the server's documented window with WithKeyRetention or
	// WithHostKeyRetention (presets: KeyRetentionStripe, …) to resend
	// for longer.
	DefaultKeyRetention         = 20 * time.Minute
	DefaultKeyHeader            = "Idempotency-Key"
	DefaultScope                = "default"
	DefaultMaxResponseBytes     = 1 << 20
	DefaultReconcileInterval    = 30 * time.Second
	DefaultReconcileMaxInterval = time.Hour
	DefaultReconcileDeadline    = 72 * time.Hour
	DefaultResumeConcurrency    = 8
	// DefaultRetainSettled is how long Run keeps succeeded and failed
	// operations before pruning them: a week, well past the key window, so
	// that a redelivered request with the same key still finds its result
	// and an operator can still look.
	DefaultRetainSettled = 7 * 24 * time.Hour
	// MaxBodyBytes bounds a journaled request body: every state change
	// rewrites the record, body included.
	MaxBodyBytes = 1 << 20
	// storedBodyBytes bounds the response body kept in the journal.
	storedBodyBytes = 64 << 10
)

// KeyFormat says how the key is written in its header.
type KeyFormat int

const (
	// KeyBare sends the key as is: Idempotency-Key: 8e0f… (Stripe, most APIs).
	KeyBare KeyFormat = iota
	// KeyQuoted sends it as an RFC 8941 string, as the IETF draft does:
	// Idempotency-Key: "8e0f…".
	KeyQuoted
)

// A Clock tells the time and waits. Tests inject one (idemtest.Clock) so
// that backoff and Retry-After need no real sleeping. A clock's wall
// steps are seen by the monotonic reading time.Now's readings carry;
// readings without one (time.Now().UTC(), In or Round(0) strip it) show
// none, and the Client's own sends are then aged by the wall clock.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done and then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// monotonicClock is a Clock that also reads a clock no step of its wall
// clock moves, as the monotonic reading time.Now's readings carry: the
// time since an instant of its own. Not exported: a test's clock models
// with it a wall clock stepped while the process runs, which no
// time.Time it could make would show (Add moves both readings), and a
// Clock of time.Now's readings needs none (Client.wallView).
type monotonicClock interface {
	Monotonic() time.Duration
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// An Option configures a Client; see New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	httpClient     *http.Client
	hook           func(*http.Request) error
	newBackoff     func() backoff.BackOff
	maxAttempts    int
	maxElapsed     time.Duration
	attemptTimeout time.Duration
	retryAfterCap  time.Duration
	keyRetention   time.Duration
	hostRetention  map[string]time.Duration // lower-case host → key window
	conflictStatus []int                    // statuses that always mean a key conflict
	keyHeader      string
	keyFormat      KeyFormat
	// keyPlacement is journal.Record.KeyPlacement for keyHeader and
	// keyFormat (placementOf), made once: every record holds this string.
	keyPlacement      string
	resultTemplate    string
	resultLag         time.Duration // WithResultLag; read with the key in the body, and after "order already paid"
	decode            Decoder
	decodeIsJSON      bool // decode is the default DecodeJSON: called directly, its Answer stays on the stack
	classify          Classifier
	retryTokens       float64
	retryRatio        float64
	logger            *slog.Logger
	clock             Clock
	onSettle          func(*Result)
	hooks             Hooks
	scope             string
	maxResponse       int64
	reconcileInterval time.Duration
	reconcileMax      time.Duration
	reconcileDeadline time.Duration
	resumeConcurrency int
	retainSettled     time.Duration
	retainSet         bool // retainSettled chosen by the caller
	journalOpts       []journal.Option
	owner             string        // lease owner (lease.go)
	leaseFor          time.Duration // lease margin (lease.go)
	errs              []error
}

func defaultConfig() *config {
	return &config{
		newBackoff:        newDefaultBackoff,
		maxAttempts:       DefaultMaxAttempts,
		maxElapsed:        DefaultMaxElapsed,
		attemptTimeout:    DefaultAttemptTimeout,
		retryAfterCap:     DefaultRetryAfterCap,
		keyRetention:      DefaultKeyRetention,
		keyHeader:         DefaultKeyHeader,
		resultLag:         DefaultResultLag,
		decode:            DecodeJSON,
		decodeIsJSON:      true,
		classify:          DefaultClassifier,
		retryTokens:       DefaultRetryTokens,
		retryRatio:        DefaultRetryTokenRatio,
		logger:            slog.New(slog.DiscardHandler),
		clock:             realClock{},
		scope:             DefaultScope,
		maxResponse:       DefaultMaxResponseBytes,
		reconcileInterval: DefaultReconcileInterval,
		reconcileMax:      DefaultReconcileMaxInterval,
		reconcileDeadline: DefaultReconcileDeadline,
		resumeConcurrency: DefaultResumeConcurrency,
		retainSettled:     DefaultRetainSettled,
		owner:             defaultOwner(),
		leaseFor:          DefaultLeaseDuration,
	}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("idem: "+format, args...))
}

// minDuration is the shortest duration option: below it no HTTP exchange
// completes, and a bare number (WithAttemptTimeout(10)) is nanoseconds,
// which made every attempt time out before it was sent.
const minDuration = time.Millisecond

func positive(c *config, name string, d time.Duration) bool {
	if d <= 0 {
		c.fail("%s must be positive, got %v", name, d)
		return false
	}
	if d < minDuration {
		c.fail("%s must be at least %v, got %v (a bare number is nanoseconds: write 10*time.Second)", name, minDuration, d)
		return false
	}
	return true
}

// atLeastOne is positive for the count options: it reports whether n is
// at least 1, and records the error naming the option if not.
func atLeastOne[N int | int64](c *config, name string, n N) bool {
	if n < 1 {
		c.fail("%s: need at least 1, got %d", name, n)
		return false
	}
	return true
}

// WithHTTPClient sets the client that sends every attempt. idem copies it
// and turns redirects off (a redirected POST turns into a GET without its
// body). The default has a connection pool sized for concurrent callers.
// Its Transport may find the key's Idempotency-Key or X-Idempotency-Key
// field under its lower-case name: so goes out a request with an empty
// body that net/http must not resend on its own (to an endpoint not known
// to read the key). Header.Get misses it there; WithRequestHook, which
// runs before, does not.
func WithHTTPClient(hc *http.Client) Option {
	return optionFunc(func(c *config) {
		if hc == nil {
			c.fail("WithHTTPClient: nil *http.Client")
			return
		}
		if hc.Timeout > 0 && hc.Timeout < minDuration {
			c.fail("WithHTTPClient: the client's Timeout %v is under %v: every attempt would time out before it is sent (a bare number is nanoseconds: write 30*time.Second)", hc.Timeout, minDuration)
			return
		}
		c.httpClient = hc
	})
}

// WithRequestHook runs fn on every outgoing request (submits and result
// queries) just before it is sent: the place to add credentials, which are
// never journaled or logged. An error from fn counts as "not sent". The
// request's context is the caller's on a Submit or Do, Resume's or Run's
// on their resends: choose nothing per operation from your own context
// values (a merchant's account, its token), which are missing there, but
// from the journaled request (its headers, URL). Not the place for a
// precondition fetched per attempt (the resource's current ETag in
// If-Match): a resend after a lost answer would carry the version the
// first copy moved to, and a server that checks it but not the key
// applies the update twice. Journal it in Request.Header instead.
//
// fn may add headers, Basic auth, query parameters and segments before
// the path. An attempt it changed otherwise is never sent, its error
// saying what changed: the key's header set to another value, removed
// or given twice (under any spelling of its name); the body replaced by
// other bytes (one read and put back byte for byte is idem's again);
// the method; the journaled path; a journaled If-* header; an account
// header (Stripe-Account, X-Razorpay-Account), which scopes the key,
// changed, or added where the request journals none (put the account in
// Request.Header: Resume has no caller's context to take it from). A
// resend must carry the key and bytes of the first copy, which may have
// executed.
func WithRequestHook(fn func(*http.Request) error) Option {
	return optionFunc(func(c *config) { c.hook = fn })
}

// WithBackoff replaces the wait policy between attempts. newPolicy is called
// once by New, to check that it returns a policy, and once per call to Do,
// so the policy may keep state. The default is
// exponential with jitter (see DefaultInitialInterval). Waits are never
// shorter than a server's Retry-After.
func WithBackoff(newPolicy func() backoff.BackOff) Option {
	return optionFunc(func(c *config) {
		if newPolicy == nil {
			c.fail("WithBackoff: nil policy constructor")
			return
		}
		// The loop asks the policy for a wait only after an attempt, with
		// the operation journaled: a nil one would panic there.
		if newPolicy() == nil {
			c.fail("WithBackoff: the constructor returned a nil policy; return one, e.g. backoff.NewExponentialBackOff()")
			return
		}
		c.newBackoff = func() backoff.BackOff {
			if p := newPolicy(); p != nil {
				return p
			}
			// Nil after New's check: end the call with ErrUnknownOutcome,
			// the operation left to the reconciler.
			return &backoff.StopBackOff{}
		}
	})
}

// WithMaxAttempts bounds the HTTP exchanges (submits and result queries) in
// one foreground call. Default DefaultMaxAttempts.
func WithMaxAttempts(n int) Option {
	return optionFunc(func(c *config) {
		if atLeastOne(c, "WithMaxAttempts", n) {
			c.maxAttempts = n
		}
	})
}

// WithMaxElapsed bounds the time one foreground call spends before it hands
// the operation to the reconciler. Default DefaultMaxElapsed.
func WithMaxElapsed(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if positive(c, "WithMaxElapsed", d) {
			c.maxElapsed = d
		}
	})
}

// WithAttemptTimeout bounds one HTTP exchange, separately from the caller's
// context. Default DefaultAttemptTimeout.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if positive(c, "WithAttemptTimeout", d) {
			c.attemptTimeout = d
		}
	})
}

// WithRetryAfterCap bounds the wait a Retry-After header can impose.
// Default DefaultRetryAfterCap.
func WithRetryAfterCap(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if positive(c, "WithRetryAfterCap", d) {
			c.retryAfterCap = d
		}
	})
}

// Key windows documented by providers, for WithKeyRetention and
// WithHostKeyRetention. Each is the provider's published minimum, with
// nothing to spare: KeyWindowMargin is what idem leaves. Check it against
// your contract.
const (
	// KeyRetentionStripe: "keys are eligible to be removed from the system
	// automatically after they're at least 24 hours old"
	// (docs.stripe.com/api/idempotent_requests).
	KeyRetentionStripe = 24 * time.Hour
	// KeyRetentionCheckout: Checkout.com's Cko-Idempotency-Key "by default,
	// keys expire after 24 hours" (checkout.com/docs/payments/manage-payments/idempotency).
	KeyRetentionCheckout = 24 * time.Hour
	// KeyRetentionFiber: the Fiber framework's idempotency middleware,
	// Lifetime default 30 min (docs.gofiber.io/api/middleware/idempotency):
	// for servers built on it with its defaults.
	KeyRetentionFiber = 30 * time.Minute
	// KeyRetentionDynamoDB: DynamoDB's TransactWriteItems ClientRequestToken
	// "is valid for 10 minutes after the first request that uses it is
	// completed" (docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html):
	// shorter than DefaultKeyRetention, so the default resends a token
	// DynamoDB may have forgotten.
	KeyRetentionDynamoDB = 10 * time.Minute
	// KeyRetentionHelcim: the Helcim Payment API's idempotency keys "are
	// cleared after 5 minutes", after which the same purchase is
	// processed as a new transaction (devdocs.helcim.com/docs/idempotency-keys):
	// shorter than DefaultKeyRetention, so the default charges a card
	// twice when a resend comes after 5 minutes (a restart, an outage).
	KeyRetentionHelcim = 5 * time.Minute
	// KeyRetentionAuthorizeNet: Authorize.Net keeps no idempotency key; it
	// refuses a transaction with the same card, amount and invoice number
	// as one within its duplicate window, 120 seconds unless the request's
	// duplicateWindow setting says otherwise (then name that), with
	// response reason 11, "A duplicate transaction has been submitted".
	// Past the window the same request is charged again, so the default
	// charges a card twice when a resend comes after 2 minutes.
	KeyRetentionAuthorizeNet = 2 * time.Minute
)

// KeyWindowMargin is how long before the end of a key window idem stops
// resending (never more than a tenth of the window: 2 min of the default
// 20, 3 of Fiber's 30). A window is a server's minimum, counted by the
// server's clock from when it stored the key, and idem counts it by the
// clock of whichever replica sends next, from the first send one of them
// journaled: that clock may run minutes slow of the one that journaled
// it, a slewing clock drifts, and a resend reaches the server some time
// after it starts. Past the window less the margin idem only queries, as
// past the window.
const KeyWindowMargin = 5 * time.Minute

// WithKeyRetention sets how long the server remembers a key, counted from
// the first send that may have executed. Past it, and from KeyWindowMargin
// before it, idem never resends, it only queries, and flags what queries
// cannot settle for review. Give the server's documented window (or a
// preset such as KeyRetentionStripe), less any clock skew you fear beyond
// the margin. Default DefaultKeyRetention (20 min).
func WithKeyRetention(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if positive(c, "WithKeyRetention", d) {
			c.keyRetention = d
		}
	})
}

// WithHostKeyRetention sets the key window for requests to one host (as
// in the URL: "api.stripe.com", or "host:port"), overriding
// WithKeyRetention for it. A host named without a port holds for every
// port of it; one named with a port, for that port only (and first). Use
// it once per host.
func WithHostKeyRetention(host string, d time.Duration) Option {
	return optionFunc(func(c *config) {
		if host == "" || strings.ContainsAny(host, "/ ") {
			c.fail("WithHostKeyRetention: %q is not a host; give it as in the URL, e.g. \"api.stripe.com\"", host)
			return
		}
		if !positive(c, "WithHostKeyRetention", d) {
			return
		}
		host = normalHost(host)
		if _, dup := c.hostRetention[host]; dup {
			c.fail("WithHostKeyRetention: host %q given twice", host)
			return
		}
		if c.hostRetention == nil {
			c.hostRetention = make(map[string]time.Duration)
		}
		c.hostRetention[host] = d
	})
}

// normalHost is a host (or host:port) as the key windows are keyed: lower
// case, without a fully qualified name's trailing dot.
func normalHost(h string) string {
	h = strings.ToLower(h)
	if host, port, err := net.SplitHostPort(h); err == nil {
		return net.JoinHostPort(strings.TrimSuffix(host, "."), port)
	}
	return strings.TrimSuffix(h, ".")
}

// WithKeyConflictStatus names statuses (besides a 422 whose body mentions
// the idempotency key, and a 400 whose body says it was used before) with
// which the server says "this key was used with another request": 417 for
// some servers, say. Such an answer to an operation none of whose attempts
// may have executed fails it with ErrKeyConflict; it is never resent. A
// status named here is a key conflict whatever its body: never name one
// the server also gives other refusals (Stripe's and Square's 400).
func WithKeyConflictStatus(codes ...int) Option {
	return optionFunc(func(c *config) {
		for _, code := range codes {
			if code < 400 || code > 499 {
				c.fail("WithKeyConflictStatus: %d is not a 4xx status", code)
				return
			}
			c.conflictStatus = append(c.conflictStatus, code)
		}
	})
}

// WithKeyHeader sets the header that carries the key (Idempotency-Key by
// default; PayPal-Request-Id and X-Idempotency-Key are common) and its format.
// A header that cannot carry it is refused: one net/http manages (Host,
// Content-Length, hop-by-hop), a credential header (Authorization, …,
// which the request hook would set over the key), or one about the body
// or a condition (Content-*, If-*, Expect, Range, method overrides).
func WithKeyHeader(name string, format KeyFormat) Option {
	return optionFunc(func(c *config) {
		// The same RFC 9110 token check as Request.Header names: a name
		// net/http refuses would fail every attempt before sending it,
		// with no trace event, so each would read as "maybe sent".
		if !httpsyntax.ValidHeaderName(name) {
			c.fail("WithKeyHeader: %q is not a header name (use WithKeyInBody when the key travels in the body)", name)
			return
		}
		if why := keyHeaderRefusal(http.CanonicalHeaderKey(name)); why != "" {
			c.fail("WithKeyHeader: %q cannot carry the key: %s", name, why)
			return
		}
		if format != KeyBare && format != KeyQuoted {
			c.fail("WithKeyHeader: unknown KeyFormat %d; use idem.KeyBare or idem.KeyQuoted", format)
			return
		}
		c.keyHeader, c.keyFormat = http.CanonicalHeaderKey(name), format
	})
}

// keyHeaderRefusal says why a header (canonical name) cannot carry the
// key, or "" if it can.
func keyHeaderRefusal(canon string) string {
	switch {
	case connectionHeader(canon) != "":
		// connectionHeader's advice is for a Request.Header's entry.
		return "net/http sets it itself, from the URL, the body or the connection; name the header the API documents for idempotency keys"
	case httpsyntax.NamedCredentialHeader(canon):
		// The hook or Transport that adds credentials overwrites the
		// key: the server gets no key, and executes every resend afresh.
		return "it carries credentials, which the request hook or Transport sets over the key (or the key over them); name the header the API documents for idempotency keys"
	case submitOnlyHeader(canon):
		return "the server reads it as a fact about the body or a condition on the request, and result queries leave it off; name the header the API documents for idempotency keys"
	}
	return ""
}

// WithKeyInBody sends no key header: the caller puts the key in the body
// itself, so every Request must carry its Key (see NewKey), and Prepare
// refuses a body that does not hold it (as written, JSON-escaped or
// form-encoded): without it the server would get no key at all. An error
// that names the member holding the key ("The same request ID has
// already been used", for "request_id") is read as about the key, as one
// naming the key header is (DefaultClassifier), and so is a 400 or 422
// saying the order or that member is a duplicate ("Duplicate order
// sent.", "client_order_id must be unique"), or a 2xx whose envelope
// carries such an error (Bybit's retCode 110072 "OrderLinkedID is
// duplicate", OKX's sCode 51016) and which the Decoder cannot read or
// reads as failed, or any 2xx with such words it reads as failed
// (Kraken Futures' "clientOrderIdAlreadyExist", PayU India's refund
// "Token already exists", Paytm's "Refund Already Raised", Trustly's 688
// ERROR_DUPLICATE_UUID for the request's own UUID): to a first
// attempt, a
// copy of which may have placed the order, it is flagged
// [ReviewKeyInUse], not failed; to a resend after a lost answer it is
// asked about, and flagged [ReviewRefusedAfterSend] if it persists. So
// is any other refusal in such an envelope that the Decoder reads as
// failed, to such a resend (Kraken's "EOrder:Insufficient funds" once
// the order filled); to a first attempt it fails. A client order id that
// is unique among open orders only (Kraken's cl_ord_id) is no key once a market order has filled: give
// such an API's order-by-client-id endpoint to WithResultEndpoint, so
// that a lost answer is asked about before anything is resent. It must
// find filled orders, not only open ones, and is asked with a GET (for
// an API whose lookups are signed POSTs, as Kraken's are, a GET of your
// own in front of it). Its 2xx
// answer that the Decoder cannot read but that holds the key as a
// member's value, with no error, says the order exists: the operation
// is kept processing and only asked about, never resent, until a Decoder
// that reads the API's orders (WithDecoder) or a person settles it. Only
// an answer that does not find the order (a JSON 404, a 400 or 422 saying it
// is "not found" or "does not exist", a JSON 2xx with no error that
// does not name it, one the Decoder reads as ErrResultNotFound) is
// followed by a resend, and only once the last
// send is older than WithResultLag (until then it is asked again); a
// query that fails (no
// answer, a 5xx, a 401, a 400 about the query itself, a 2xx that is no
// JSON or carries an error, also as an envelope's code says one, a
// proxy's own 404, a cache's stored answer that does not name the key)
// is asked again, and a 503 to a submit (which
// may follow the work done) is asked about before any resend.
func WithKeyInBody() Option {
	return optionFunc(func(c *config) { c.keyHeader = "" })
}

// DefaultResultLag is how long, with the key in the body, a result
// endpoint that does not find an order may still be behind the engine
// that placed it. Binance answers -2013 "Order does not exist." for
// orders it has placed "for up to about a minute" (dev.binance.vision,
// "FAQ: Error message Order does not exist"); 22 s and 62 s were
// measured (Mike-Mercer/Binance-REST-Test). Twice the longest seen, and
// well inside the default key window less its margin (18 min), so a
// truly unplaced order is still resent in time.
const DefaultResultLag = 2 * time.Minute

// maxResultLag bounds WithResultLag: a read path a day behind is an
// outage, not lag, and a larger value is most likely a unit mistake.
const maxResultLag = 24 * time.Hour

// WithResultLag sets how long the result endpoint may not yet show an
// order it has placed. It applies with the key in the body
// (WithKeyInBody): a client order id the server refuses while its order
// is open and forgets once it has filled, so a resend after a lagging
// "not found" places the order again; and to a payment a header key's
// server refused "order already paid", or a create "order already
// exists" with a 409 (checking the order before the key, so a copy of
// ours may have paid or made it), which its "not found" fails.
// Until the last send that may have placed the order is older than d
// (by the journaled attempt
// times; one the clock finds in the future is not; one an earlier
// process sent counts from this process's first call at the earliest,
// as its clock may have read slow; this process's own are aged by the
// monotonic clock since its first call, as a wall clock stepped forward
// would age them), a "not found" is inconclusive: asked again later, in
// the call within its budget, then by Resume and Run, which resend only
// once d has passed, and never past the key window (flagged then, as any
// query that cannot settle). 0 turns it off: a "not found" is resent at
// once. A header key's server replays a resend, so it needs none.
// Default DefaultResultLag; at most 24 hours.
func WithResultLag(d time.Duration) Option {
	return optionFunc(func(c *config) {
		switch {
		case d == 0:
			c.resultLag = 0
		case d > maxResultLag:
			c.fail("WithResultLag: %v is longer than %v: no read path lags so long (is it a unit mistake?); a lag past the key window never resends an order not found", d, maxResultLag)
		case positive(c, "WithResultLag", d):
			c.resultLag = d
		}
	})
}

// WithResultEndpoint sets the URL template of the endpoint that reports an
// operation's result by key, with "{key}" where the key goes (path-escaped
// in the path, query-escaped in the query string):
// "https://api.example.com/v1/operations/{key}", or a path such as
// "/operations/{key}" resolved against each request's URL.
func WithResultEndpoint(template string) Option {
	return optionFunc(func(c *config) {
		if !strings.Contains(template, "{key}") {
			c.fail("WithResultEndpoint: template %q has no {key}; put {key} where the key goes, e.g. \"/v1/operations/{key}\"", template)
			return
		}
		u, err := url.Parse(strings.ReplaceAll(template, "{key}", "k"))
		if err != nil {
			c.fail("WithResultEndpoint: %v", err)
			return
		}
		// An absolute template is checked as each request's ResultURL
		// would be, once, here: else every Prepare would refuse it, blaming
		// a ResultURL the caller never set.
		if u.Scheme != "" || u.Host != "" {
			if _, err := absoluteURL("WithResultEndpoint", u.String()); err != nil {
				c.errs = append(c.errs, err)
				return
			}
		}
		c.resultTemplate = template
	})
}

// WithDecoder replaces DecodeJSON for reading 2xx bodies.
func WithDecoder(d Decoder) Option {
	return optionFunc(func(c *config) {
		if d == nil {
			c.fail("WithDecoder: nil decoder")
			return
		}
		c.decode, c.decodeIsJSON = d, false
	})
}

// WithClassifier replaces DefaultClassifier for submit responses.
func WithClassifier(cl Classifier) Option {
	return optionFunc(func(c *config) {
		if cl == nil {
			c.fail("WithClassifier: nil classifier")
			return
		}
		c.classify = cl
	})
}

// WithRetryBudget sizes the retry budget each host (and port) of the
// operations' URLs has: retries to a host stop
// while fewer than maxTokens/2 of its tokens remain; each attempt that does
// not settle costs it one token and each one that does earns ratio back. A
// host's outage thus leaves retries to other hosts alone. maxTokens 0 turns
// the budget off. Default DefaultRetryTokens, DefaultRetryTokenRatio.
func WithRetryBudget(maxTokens, ratio float64) Option {
	return optionFunc(func(c *config) {
		if maxTokens < 0 || ratio < 0 {
			c.fail("WithRetryBudget: tokens and ratio must not be negative, got %v, %v", maxTokens, ratio)
			return
		}
		// Comparisons with NaN and Inf/2 > Inf are false: the bucket would
		// never allow a retry (or never again after a NaN refund).
		if math.IsNaN(maxTokens) || math.IsInf(maxTokens, 0) || math.IsNaN(ratio) {
			c.fail("WithRetryBudget: tokens must be a finite number and ratio a number, got %v, %v; 0 tokens turns the budget off", maxTokens, ratio)
			return
		}
		c.retryTokens, c.retryRatio = maxTokens, ratio
	})
}

// WithLogger sets the logger; idem is silent by default. Attributes are
// stable: op, key, scope, attempt, kind, status, state, resource_id,
// retry_after, elapsed, outcome. Credentials are never logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.fail("WithLogger: nil logger (leave the option out to stay silent)")
			return
		}
		c.logger = l
	})
}

// WithClock replaces the wall clock, for tests.
func WithClock(clk Clock) Option {
	return optionFunc(func(c *config) {
		if clk == nil {
			c.fail("WithClock: nil clock")
			return
		}
		c.clock = clk
	})
}

// WithSettleFunc sets the callback told about each operation that Resume or
// Run settles: work the application handed off and must still learn about.
// So is one Confirm or Resolve settles from open (a person's resolution
// through the admin handler), on their caller's goroutine.
// A failed Result with Review set may have executed (as Hooks.Settle
// says): not a failure to retry under a new key; a succeeded one flagged
// ReviewKeyInUse may be another request's success, not one to ship on;
// a failed one with KeyConflict is the key refused, not the order: an
// earlier request under it may have paid (a person's). It runs after the
// outcome is committed, on the goroutine of Run or Resume (or Confirm,
// Resolve): do not call Close or Shutdown from it, which wait for that
// very call to return. A Settle or Review hook's panic does not skip it.
// It is called once and never again: a process killed after the commit,
// before it returned, leaves the settlement told to nobody (Resume visits
// open operations only). Record work handed off as such, and at start-up
// Lookup what is still so (README, "Resume and the reconciler").
func WithSettleFunc(fn func(*Result)) Option {
	return optionFunc(func(c *config) { c.onSettle = fn })
}

// WithHooks sets the hooks (hooks.go): events for metrics, traces and a
// service's own reactions.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}

// WithScope sets the scope of requests that leave Request.Scope empty.
// Default DefaultScope.
func WithScope(scope string) Option {
	return optionFunc(func(c *config) {
		if err := checkName("scope", scope); err != nil {
			c.errs = append(c.errs, fmt.Errorf("WithScope: %w", err))
			return
		}
		c.scope = scope
	})
}

// WithMaxResponseBytes caps how much of a response body is read. A 2xx body
// over the cap proves nothing and is treated as ambiguous.
// Default DefaultMaxResponseBytes.
func WithMaxResponseBytes(n int64) Option {
	return optionFunc(func(c *config) {
		if atLeastOne(c, "WithMaxResponseBytes", n) {
			c.maxResponse = n
		}
	})
}

// WithReconcile sets the reconciler's schedule: an unsettled operation is
// looked at again after interval, doubling up to maxInterval; after
// deadline (from its creation) automatic reconciliation stops and the
// operation is flagged for review. Defaults DefaultReconcileInterval,
// DefaultReconcileMaxInterval, DefaultReconcileDeadline.
func WithReconcile(interval, maxInterval, deadline time.Duration) Option {
	return optionFunc(func(c *config) {
		if !positive(c, "WithReconcile interval", interval) || !positive(c, "WithReconcile maxInterval", maxInterval) ||
			!positive(c, "WithReconcile deadline", deadline) {
			return
		}
		if maxInterval < interval {
			c.fail("WithReconcile: maxInterval %v is shorter than interval %v", maxInterval, interval)
			return
		}
		c.reconcileInterval, c.reconcileMax, c.reconcileDeadline = interval, maxInterval, deadline
	})
}

// WithResumeConcurrency bounds how many operations Resume and Run drive at
// once on one host; across hosts they drive up to twice as many, so that
// a host that answers slowly leaves the others as many workers again.
// It also sets how many of a host's answers in a row, let through after
// it asked for rest (429 or 503), end Run's pacing of that host: until
// then Run visits it one operation at a time.
// Default DefaultResumeConcurrency.
func WithResumeConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if atLeastOne(c, "WithResumeConcurrency", n) {
			c.resumeConcurrency = n
		}
	})
}

// WithRetainSettled sets how long after settling Run keeps a succeeded or
// failed operation before pruning it; 0 turns pruning off (prune with the
// idem command instead). It must be at least the key window
// (WithKeyRetention): within the window, a request resubmitted with the
// same key must find its journaled result, or it would be sent again.
// Default DefaultRetainSettled, or the key window if that is longer.
func WithRetainSettled(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.fail("WithRetainSettled: negative duration %v", d)
			return
		}
		c.retainSettled, c.retainSet = d, true
	})
}

// WithJournalOptions passes options to journal.Open; it only matters to Open.
func WithJournalOptions(opts ...journal.Option) Option {
	return optionFunc(func(c *config) { c.journalOpts = append(c.journalOpts, opts...) })
}

// longestKeyWindow is the longest key window any host is given: the
// client-wide one, or a host's own (WithHostKeyRetention) if longer.
func (c *config) longestKeyWindow() time.Duration {
	longest := c.keyRetention
	for _, d := range c.hostRetention {
		longest = max(longest, d)
	}
	return longest
}

func (c *config) err() error {
	longest := c.longestKeyWindow()
	if !c.retainSet {
		c.retainSettled = max(c.retainSettled, longest)
	}
	if c.retainSettled != 0 && c.retainSettled < longest {
		c.fail("WithRetainSettled %v is shorter than the key window %v: a resubmitted key could be sent twice; keep settled operations at least as long", c.retainSettled, longest)
	}
	return errors.Join(c.errs...)
}
