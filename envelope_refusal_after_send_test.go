package idem_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// freedIDExchange is an order API that answers its refusals 200 OK and
// whose client order id is unique among open orders only: once a market
// order has filled, its id is free again.
//   - Kraken's spot REST AddOrder (docs.kraken.com/api): "HTTP status
//     codes are generally not used by our API to convey information about
//     the state of requests", errors come in the "error" array; cl_ord_id
//     is unique "across open orders" (Spot Client Order Identifiers).
//   - KuCoin's POST /api/v1/orders: business errors 200 OK
//     (Kucoin/kucoin-python-sdk#22), clientOid enforced against active
//     orders only (Kucoin/kucoin-api-docs#468).
//
// The account holds the funds for one order. The first create places it,
// it fills at once, and its connection drops before the answer is out; a
// repeat of the id is then no duplicate but a new order the spent
// balance refuses (refusal).
type freedIDExchange struct {
	refusal string

	mu      sync.Mutex
	funds   int // orders the balance can pay for
	orders  int
	creates []string
}

func (x *freedIDExchange) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	x.mu.Lock()
	defer x.mu.Unlock()
	x.creates = append(x.creates, string(b))
	if x.funds == 0 {
		_, _ = io.WriteString(w, x.refusal)
		return
	}
	x.funds--
	x.orders++
	dropConnection(w)
}

// decodeKraken reads AddOrder's answer as a user writes it: the order's
// txid settles it, and an error, Kraken's refusal of the order (an
// API answering every refusal 200 OK has its decoder say which fail),
// fails it.
func decodeKraken(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Error  []string `json:"error"`
		Result struct {
			TxID []string `json:"txid"`
		} `json:"result"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case len(v.Error) > 0:
		return idem.Outcome{State: idem.StateFailed, Reason: v.Error[0]}, nil
	case len(v.Result.TxID) != 1:
		return idem.Outcome{}, errors.New("kraken: no order")
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Result.TxID[0]}, nil
}

// An order API that answers its refusals 200 OK, and whose client order
// id a filled order frees, refuses the resend after a lost answer for the
// balance the first order spent: the decoder read the refusal as failed,
// ErrFailed for an order that filled, which invites it again under a new
// id. Such a refusal to a resend of an order that may have been placed
// proves nothing of the order, as Binance's 400 -2010 "Account has
// insufficient balance" does not: asked about (here, with no result
// endpoint, resent), and left for a person once it persists. One order,
// every create the same bytes.
func TestEnvelopeRefusalToAResendIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name, path, body, refusal string
		decode                    idem.Decoder
	}{
		{name: "Kraken", path: "/0/private/AddOrder", decode: decodeKraken,
			body:    `{"ordertype":"market","type":"buy","volume":"0.01","pair":"XBTUSD","cl_ord_id":"ord-9"}`,
			refusal: `{"error":["EOrder:Insufficient funds"]}`},
		{name: "KuCoin", path: "/api/v1/orders", decode: decodeKuCoin,
			body:    `{"clientOid":"ord-9","side":"buy","symbol":"BTC-USDT","type":"market","funds":"100"}`,
			refusal: `{"code":"200004","msg":"Balance insufficient!"}`},
		// The same refusal behind a UTF-8 byte order mark, as a server on
		// .NET's UTF8Encoding(true) writes one, read by a decoder that
		// skips it as DecodeJSON does (RFC 8259 8.1).
		{name: "Kraken behind a byte order mark", path: "/0/private/AddOrder",
			decode: func(a *idem.Answer) (idem.Outcome, error) {
				b := *a
				b.Body = bytes.TrimPrefix(a.Body, []byte("\ufeff"))
				return decodeKraken(&b)
			},
			body:    `{"ordertype":"market","type":"buy","volume":"0.01","pair":"XBTUSD","cl_ord_id":"ord-9"}`,
			refusal: "\ufeff" + `{"error":["EOrder:Insufficient funds"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &freedIDExchange{refusal: tt.refusal, funds: 1}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(tt.decode))

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + tt.path,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(tt.body)})
			requireRefusedAfterSend(t, c, res, err, "ord-9", "order that filled")

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, 1, x.orders, "orders")
			require.Equal(t, slices.Repeat([]string{tt.body}, 4), x.creates, "creates")
		})
	}
}
