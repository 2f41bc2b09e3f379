package idem_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// answeringTransport answers every request 201 with a result body, in
// memory, as a server that executes each order would (modelled on the
// bench's plain handler): the allocations counted are the client's.
type answeringTransport struct{}

func (answeringTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return createdAnswer(r, `{"state":"succeeded","resourceId":"ord_1"}`), nil
}

// createdAnswer is a 201 answering r with the JSON body s.
func createdAnswer(r *http.Request, s string) *http.Response {
	return &http.Response{
		StatusCode: http.StatusCreated, Status: "201 Created", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(s)),
		ContentLength: int64(len(s)),
		Request:       r,
	}
}

// A Submit answered at once is the path every operation takes: its
// allocations are counted, the store's (memStore's record copies) and the
// transport's included, so that a cut is kept. The submit's journaled
// outcome was three values the commit's closure captured, each moved to
// the heap, and the closure: 4 allocations where submitEnd makes 2. Then
// the store's fn was commit's closure over submitEnd's apply method value
// and the commit's time: 3 allocations where commitEnd, whose fn is
// submitEnd's write, makes 2. And the request's URL, then its body's
// reader and its header's values, were allocations of their own, where
// they are the trace's room now (parsedURL.newRequest, requestRoom,
// copyHeader).
func TestSubmitAllocations(t *testing.T) {
	c, err := idem.New(newMemStore(), idem.WithHTTPClient(&http.Client{Transport: answeringTransport{}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	req := idem.Request{URL: "http://127.0.0.1:8080/v1/orders", Body: []byte(`{"amount":1000,"currency":"EUR"}`)}
	submit := func() {
		res, err := c.Submit(ctx, req)
		if err != nil || res.State != idem.StateSucceeded {
			t.Fatal(res, err)
		}
	}
	// The first answer tells the client the endpoint reads the key
	// (heardEndpoints): the sends after it are the common case.
	for range 3 {
		submit()
	}
	if n := testing.AllocsPerRun(200, submit); n > 96 {
		t.Errorf("Submit allocs = %v; want at most 96", n)
	}
}
