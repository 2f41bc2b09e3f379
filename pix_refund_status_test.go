package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// pixRefunds is the refunds of Brazil's API Pix (BACEN's specification,
// bacen/pix-api openapi.yaml): PUT /pix/{e2eid}/devolucao/{id} asks for a
// refund under the client's own id, answered 201 with the Devolucao
// ({"id","rtrId","valor","horario","status"}) EM_PROCESSAMENTO; it ends
// DEVOLVIDO or NAO_REALIZADO, its two final statuses (devolucaoResponse2:
// NAO_REALIZADO, motivo "Negado por timeout"). An id it holds is refused
// 400 problem+json PixDevolucaoInvalida ("um {id} já utilizado por outra
// requisição de devolução"); GET of the same path reads the refund.
type pixRefunds struct {
	srv   *httptest.Server
	final string // the status every refund reaches

	mu      sync.Mutex
	puts    int
	refunds map[string]string // id: status
}

const pixRefundPath = "/v2/pix/E12345678202009091221abcdef12345/devolucao/"

func newPixRefunds(t testing.TB, final string) *pixRefunds {
	t.Helper()
	p := &pixRefunds{final: final, refunds: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, pixRefundPath)
		if !ok {
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		status, held := p.refunds[id]
		switch r.Method {
		case http.MethodGet:
			if !held {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = fmt.Fprint(w, `{"type":"https://pix.bcb.gov.br/api/v2/error/PixDevolucaoNaoEncontrada",`+
					`"title":"Devolução não encontrada","status":404,"detail":"Devolução não encontrada para o e2eid informado."}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprint(w, pixRefund(id, status))
		case http.MethodPut:
			p.puts++
			if held {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprint(w, `{"type":"https://pix.bcb.gov.br/api/v2/error/PixDevolucaoInvalida","title":"Devolução inválida.",`+
					`"status":400,"detail":"A presente requisição de devolução não respeita o _schema_ ou não faz sentido semanticamente."}`)
				return
			}
			// The refund is asked for, and its answer lost on the way.
			p.refunds[id] = p.final
			loseAnswer(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func pixRefund(id, status string) string {
	motivo := ""
	if status == "NAO_REALIZADO" {
		motivo = `,"motivo":"Negado por timeout"`
	}
	return fmt.Sprintf(`{"id":%q,"rtrId":"D12345678202011111000fghij789012","valor":"20.00",`+
		`"horario":{"solicitacao":"2020-09-11T15:25:59.411Z"},"status":%q%s}`, id, status, motivo)
}

// A Pix refund asked for under its id, its answer lost, is read back by
// the same path. NAO_REALIZADO is one of the refund's two final statuses:
// it was not made. DecodeJSON took any status it did not know for a
// resource made, so the refund the PSP declined settled succeeded, and
// the caller, told the customer had been refunded, never refunded them.
// It is failed: nothing was paid back, and a new refund needs a new id.
// DEVOLVIDO, and EM_PROCESSAMENTO (a refund asked for and under way,
// as any resource created pending), stay succeeded.
func TestPixRefundNotMadeIsFailed(t *testing.T) {
	for _, tt := range []struct {
		status string
		state  idem.State
		kinds  []error
	}{
		{"NAO_REALIZADO", idem.StateFailed, []error{idem.ErrFailed}},
		{"DEVOLVIDO", idem.StateSucceeded, nil},
		{"EM_PROCESSAMENTO", idem.StateSucceeded, nil},
	} {
		t.Run(tt.status, func(t *testing.T) {
			p := newPixRefunds(t, tt.status)
			c := clientFor(t, p.srv, idemtest.NewClock(epoch), idem.WithResultEndpoint(pixRefundPath+"{key}"))
			res, err := c.Submit(t.Context(), p.request())
			requireOutcome(t, res, err, tt.state, tt.kinds, "D7f3c9a", "")
			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, 1, p.puts, "refunds asked for: the lost answer is read back, never asked again")
			require.Len(t, p.refunds, 1)
			if tt.state == idem.StateFailed {
				require.Equal(t, "NAO_REALIZADO", res.Reason)
			}
		})
	}
}

func (p *pixRefunds) request() idem.Request {
	return idem.Request{Key: "D7f3c9a", Method: http.MethodPut, URL: p.srv.URL + pixRefundPath + "D7f3c9a", Body: []byte(`{"valor":"20.00"}`)}
}

// Without the GET, the refund whose answer was lost is asked for again
// under its id, which the PSP refuses 400 PixDevolucaoInvalida, its words
// in Portuguese: a refusal after a send that may have executed, for a
// person once it persists, never failed (a new id would refund twice).
func TestPixRefundIDHeldAfterALostAnswerIsNoFailure(t *testing.T) {
	p := newPixRefunds(t, "EM_PROCESSAMENTO")
	c := clientFor(t, p.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), p.request())
	requireRefusedAfterSend(t, c, res, err, "D7f3c9a", "refund")
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, 4, p.puts, "the lost one, then three refused")
	require.Len(t, p.refunds, 1)
}
