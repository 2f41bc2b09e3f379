package idem_test

import (
	"encoding/json"
	"fmt"
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

// timedOutOrders is an order API with the client order id in the body
// (OKX's clOrdId) whose first create is answered with a 4xx, the order
// placed behind it when placed says so, and whose orders are read back
// by clOrdId in OKX's envelope ({"code":"0","data":[{"ordId","clOrdId",
// "state"}]}; {"code":"51603","msg":"Order does not exist"} for an id it
// does not hold).
type timedOutOrders struct {
	status int
	first  string
	placed bool

	mu      sync.Mutex
	creates []string
	orders  []string
	queries int
}

func (x *timedOutOrders) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodGet {
		x.queries++
		id := r.URL.Query().Get("clOrdId")
		if n := slices.Index(x.orders, id); n >= 0 {
			_, _ = fmt.Fprintf(w, `{"code":"0","msg":"","data":[{"ordId":"31223%d","clOrdId":%q,"state":"filled"}]}`, n+1, id)
			return
		}
		_, _ = io.WriteString(w, `{"code":"51603","msg":"Order does not exist","data":[]}`)
		return
	}
	var v struct {
		ClOrdID string `json:"clOrdId"`
	}
	_ = json.Unmarshal(b, &v)
	x.creates = append(x.creates, string(b))
	if len(x.creates) == 1 {
		if x.placed {
			x.orders = append(x.orders, v.ClOrdID)
		}
		w.WriteHeader(x.status)
		_, _ = io.WriteString(w, x.first)
		return
	}
	x.orders = append(x.orders, v.ClOrdID)
	_, _ = fmt.Fprintf(w, `{"code":"0","msg":"","data":[{"ordId":"31223%d","clOrdId":%q,"sCode":"0","sMsg":""}]}`, len(x.orders), v.ClOrdID)
}

// decodeOKXOrder reads OKX's order, a create's or a lookup's: the order
// in data settles succeeded, a lookup's "state" canceled or a create's
// sCode other than "0" fails it; anything else proves nothing.
func decodeOKXOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Code string `json:"code"`
		Data []struct {
			OrdID   string `json:"ordId"`
			ClOrdID string `json:"clOrdId"`
			State   string `json:"state"`
			SCode   string `json:"sCode"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.Code != "0" || len(v.Data) != 1 || v.Data[0].ClOrdID != a.Key {
		return idem.Outcome{}, fmt.Errorf("okx: not the order %q", a.Key)
	}
	if d := v.Data[0]; d.State == "canceled" || d.SCode != "" && d.SCode != "0" {
		return idem.Outcome{State: idem.StateFailed, ResourceID: d.OrdID, Reason: d.State + d.SCode}, nil
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data[0].OrdID}, nil
}

// A 4xx whose words say the outcome is unknown is no refusal: OKX's
// 50004, HTTP 400, "Endpoint request timeout (does not mean that the
// request was successful or failed, please check the request result)"
// (its error code table, web3.okx.com/onchainos/dev-docs/data/error, as
// okx.com/docs-v5's), and Zerodha Kite's 400 "Order request timed out.
// Please check the order book and confirm before placing again.", after
// which the order was placed (kite.trade/forum/discussion/comment/35732).
// A first attempt so answered was settled failed, and a caller told
// failed places the order again under a new id. Now it is asked about,
// and the order placed settles the call; a 400 about the request itself
// still fails it at once.
func TestRefusalSayingTheOutcomeIsUnknownIsAskedAbout(t *testing.T) {
	const body = `{"instId":"BTC-USDT","tdMode":"cash","clOrdId":"ord9","side":"buy","ordType":"market","sz":"100"}`
	for _, tt := range []struct {
		name    string
		status  int
		first   string
		placed  bool
		failed  bool
		queries int
	}{
		{name: "OKX's 50004", status: http.StatusBadRequest, placed: true, queries: 1,
			first: `{"code":"50004","msg":"Endpoint request timeout (does not mean that the request was successful or failed, please check the request result)","data":[]}`},
		{name: "Kite's order request timed out", status: http.StatusBadRequest, placed: true, queries: 1,
			first: `{"status":"error","message":"Order request timed out. Please check the order book and confirm before placing again.","data":null,"error_type":"NetworkException"}`},
		{name: "a parameter error", status: http.StatusBadRequest, failed: true,
			first: `{"code":"51000","msg":"Parameter sz error","data":[]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &timedOutOrders{status: tt.status, first: tt.first, placed: tt.placed}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeOKXOrder),
				idem.WithResultEndpoint(srv.URL+"/api/v5/trade/order?instId=BTC-USDT&clOrdId={key}"))
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord9", URL: srv.URL + "/api/v5/trade/order",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
			requireFailedOrPlaced(t, res, err, tt.failed, "312231")
			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{body}, x.creates, "one create")
			require.Equal(t, tt.queries, x.queries, "lookups")
			if tt.placed {
				require.Equal(t, []string{"ord9"}, x.orders)
			}
		})
	}
}
