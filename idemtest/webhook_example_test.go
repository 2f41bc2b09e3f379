package idemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idem/idemtest"
)

// The server sends a signed event for every state an order reaches, here
// each one twice; the events echo the request's metadata.
func ExampleWithWebhook() {
	var mu sync.Mutex
	var got []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev idemtest.WebhookEvent
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %s signed:%t", ev.ID, ev.Type, ev.Metadata, r.Header.Get(idemtest.WebhookSignatureHeader) != ""))
		mu.Unlock()
	}))
	defer receiver.Close()

	srv, err := idemtest.NewServer(idemtest.WithWebhook(idemtest.Webhook{
		URL: receiver.URL, Secret: []byte("whsec_example"), Duplicate: 1, Delay: 10 * time.Millisecond,
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	post(srv.Client(), srv.URL+"/orders", "order-1", `{"amount":10,"metadata":{"idem_key":"order-1"}}`)
	if err := srv.FlushWebhooks(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	mu.Lock()
	slices.Sort(got)
	for _, line := range got {
		fmt.Println(line)
	}
	mu.Unlock()
	fmt.Printf("%+v\n", srv.WebhookStats())
	// Output:
	// 201  {"state":"succeeded","resourceId":"ord_000001","key":"order-1"}
	// evt_000001 order.succeeded {"idem_key":"order-1"} signed:true
	// evt_000001 order.succeeded {"idem_key":"order-1"} signed:true
	// {Events:1 Delivered:2 Duplicated:1 Lost:0 Failed:0 Retries:0}
}
