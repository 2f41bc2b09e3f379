package idem_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The API has no result endpoint and the response is lost: the order stays
// unknown. The provider's webhook event says what happened; Confirm
// settles it, and the same event delivered again changes nothing.
func ExampleClient_Confirm() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	c, err := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithHTTPClient(srv.Client()), idem.WithMaxAttempts(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "order-42"}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(ctx, idem.Request{Key: "order-42", URL: srv.URL + "/orders",
		Body: []byte(`{"amount":1999,"metadata":{"idem_key":"order-42"}}`)})
	fmt.Println(res.State, errors.Is(err, idem.ErrUnknownOutcome))

	// In the webhook handler: the event echoes the metadata's key.
	event := idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_000001",
		Source: "provider-webhook", EventID: "evt_000001", Reason: "order.succeeded"}
	for range 2 { // delivered twice
		res, err = c.Confirm(ctx, "", "order-42", event)
		fmt.Println(res.State, res.ResourceID, res.Confirmed, err)
	}

	// An event that contradicts it is flagged, never applied.
	res, err = c.Confirm(ctx, "", "order-42", idem.Confirmation{State: idem.StateFailed,
		Source: "provider-webhook", EventID: "evt_000002", Reason: "order.failed"})
	fmt.Println(res.State, errors.Is(err, idem.ErrConfirmConflict), res.Review)
	// Output:
	// unknown true
	// succeeded ord_000001 true <nil>
	// succeeded ord_000001 true <nil>
	// succeeded true an external confirmation contradicts the recorded outcome
}
