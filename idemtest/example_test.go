package idemtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// post sends body to url with an idempotency key and prints what came back.
func post(c *http.Client, url, key, body string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("no response")
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(resp.StatusCode, "body cut short")
		return
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
}

func ExampleNewServer() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`) // a retry
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":9999}`) // a bug

	fmt.Println("orders for order-42:", srv.Effects("", "order-42"))
	// Output:
	// 201  {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
	// 201 true {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
	// 422  {"error":"idempotency key reused with a different request"}
	// orders for order-42: 1
}

func ExampleServer_Inject() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// The server commits the order, then the response is lost.
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "order-42"}); err != nil {
		fmt.Println(err)
		return
	}
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)

	// Retrying with the same key gets the stored result, not a second order.
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)

	st := srv.Stats()
	fmt.Println("side effects:", st.SideEffects, "max per key:", st.MaxEffectsPerKey)
	for _, r := range srv.Requests() {
		fmt.Printf("%s %s key=%s status=%d fault=%q\n", r.Method, r.Path, r.Key, r.Status, r.Fault)
	}
	// Output:
	// no response
	// 201 true {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
	// side effects: 1 max per key: 1
	// POST /orders key=order-42 status=0 fault="drop-after-commit"
	// POST /orders key=order-42 status=201 fault=""
}

func ExampleServer_ResultURL() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// Throttled: nothing recorded, so the result endpoint knows nothing.
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, RetryAfter: 2 * time.Second}); err != nil {
		fmt.Println(err)
		return
	}
	post(srv.Client(), srv.URL+"/payments", "pay/7", `{"amount":5}`)

	resp, err := srv.Client().Get(srv.ResultURL("pay/7"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(b))

	post(srv.Client(), srv.URL+"/payments", "pay/7", `{"amount":5}`)
	resp, err = srv.Client().Get(srv.ResultURL("pay/7"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(srv.ResultURL("pay/7") == srv.URL+"/operations/pay%2F7", resp.StatusCode, string(b))
	// Output:
	// 429  {"error":"too many requests"}
	// 404 {"error":"not found"}
	// 201  {"state":"succeeded","resourceId":"ord_000001","key":"pay/7"}
	// true 200 {"state":"succeeded","resourceId":"ord_000001","key":"pay/7"}
}

func ExampleWithRetention() {
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	srv, err := idemtest.NewServer(idemtest.WithRetention(24*time.Hour), idemtest.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	post(srv.Client(), srv.URL+"/orders", "order-42", `{}`)
	mu.Lock()
	now = now.Add(25 * time.Hour) // the server has forgotten the key
	mu.Unlock()
	post(srv.Client(), srv.URL+"/orders", "order-42", `{}`)

	// A client that resends after the window creates a second order.
	fmt.Println("orders for order-42:", srv.Effects("", "order-42"))
	// Output:
	// 201  {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
	// 201  {"state":"succeeded","resourceId":"ord_000002","key":"order-42"}
	// orders for order-42: 2
}

func ExampleWithProfile() {
	srv, err := idemtest.NewServer(idemtest.WithSeed(1), idemtest.WithProfile(idemtest.Profile{
		Rates: map[idemtest.FaultKind]float64{idemtest.Unavailable: 0.5},
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// Resend until the order is accepted: the seed fixes which attempts
	// are refused, and the key keeps it to one order.
	for range 10 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			break
		}
	}
	fmt.Println("orders:", srv.Stats().SideEffects, "max per key:", srv.Stats().MaxEffectsPerKey)
	// Output:
	// orders: 1 max per key: 1
}

// Invalid input is an error that says what to change, never a panic; the
// server is left as it was.
func ExampleServer_Inject_invalid() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	err = srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Count: -1})
	fmt.Println(err)
	err = srv.SetProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Unavailable: 1.5}})
	fmt.Println(err)
	_, err = idemtest.NewServer(idemtest.WithKeyHeader("Idempotency Key"))
	fmt.Println(err)

	post(srv.Client(), srv.URL+"/orders", "order-42", `{}`)
	// Output:
	// idemtest: Inject: fault throttle: count -1 is negative (want 0 for one request, or the number of requests to fault)
	// idemtest: SetProfile: rate of unavailable is 1.5 (want a probability between 0 and 1)
	// idemtest: NewServer: key header "Idempotency Key" is not a valid header name (want a token such as Idempotency-Key, with no spaces, colons or other separators)
	// 201  {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
}

// A test in another process scripts faults and reads counters over HTTP.
func Example_controlOverHTTP() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/_faults", "application/json",
		strings.NewReader(`{"kind":"unavailable","retry_after":"2s"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("inject:", resp.StatusCode)

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", `"order-42"`) // an RFC 8941 string
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("submit:", resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))

	resp, err = http.Get(srv.URL + "/_stats")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(b))
	// Output:
	// inject: 204
	// submit: 503 Retry-After: 2
	// {"requests":1,"submits":1,"queries":0,"side_effects":0,"keys":0,"max_effects_per_key":0,"replays":0,"conflicts":0,"refusals":0,"foreign_effects":0,"max_submits_after_final":0}
}

// Servers differ in what they store for a key. Under StoredErrors the
// handler's 500 is the key's answer for its whole life: resending the key
// cannot change it.
func ExampleWithBehavior() {
	srv, err := idemtest.NewServer(idemtest.WithBehavior(idemtest.StoredErrors()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit}); err != nil {
		fmt.Println(err)
		return
	}
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	fmt.Printf("%s: %+v\n", srv.Behavior(), srv.KeyStats("", "order-42"))
	// Output:
	// 500  {"error":"internal server error"}
	// 500 true {"error":"internal server error"}
	// 500 true {"error":"internal server error"}
	// stored-errors: {Effects:0 ForeignEffects:0 SubmitsAfterFinal:2 Conflicts:0 Refusals:0}
}

// Someone else used the key first. While their request processes, ours
// gets 409; then, under NoBodyCompare, their order, marked replayed: a
// client must not take it for its own.
func ExampleServer_Preempt() {
	clock := idemtest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	srv, err := idemtest.NewServer(idemtest.WithBehavior(idemtest.NoBodyCompare()), idemtest.WithClock(clock.Now))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	if err := srv.Preempt("", "order-42", 10*time.Second); err != nil {
		fmt.Println(err)
		return
	}
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	clock.Advance(10 * time.Second)
	post(srv.Client(), srv.URL+"/orders", "order-42", `{"amount":1000}`)
	fmt.Printf("%+v\n", srv.KeyStats("", "order-42"))
	// Output:
	// 409  {"error":"request with this key is in progress"}
	// 201 true {"state":"succeeded","resourceId":"ord_000001","key":"order-42"}
	// {Effects:0 ForeignEffects:1 SubmitsAfterFinal:1 Conflicts:0 Refusals:0}
}

// An idem client asks the server's result endpoint about an operation whose
// answer was lost; ResultTemplate is the endpoint's template.
func ExampleServer_ResultTemplate() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "idemtest-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	c, err := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithHTTPClient(srv.Client()),
		idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "order/42"}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(context.Background(), idem.Request{
		Key: "order/42", URL: srv.URL + "/orders", Body: []byte(`{"amount":1999}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(srv.ResultTemplate() == srv.URL+"/operations/{key}")
	for _, r := range srv.Requests() {
		fmt.Printf("%s %s %d fault=%q\n", r.Method, r.Path, r.Status, r.Fault)
	}
	fmt.Println(res.State, res.ResourceID, "orders:", srv.Effects("", "order/42"))
	// Output:
	// true
	// POST /orders 0 fault="drop-after-commit"
	// GET /operations/order/42 200 fault=""
	// succeeded ord_000001 orders: 1
}
