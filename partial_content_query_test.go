package idem_test

import (
	"net/http"
	"testing"
)

// A result query answered 206 Partial Content came from a cache serving
// part of something it stored (idem sends no Range): even a JSON body
// with no error and no order in it is no search that found nothing. It
// was read as one: with the client order id in the body, once the result
// lag had passed, Resume sent the filled order again and a second was
// placed. A Decoder's ErrResultNotFound for it proves no more. Now a 206
// is a query that failed, asked again, never resent (modelled: a cache
// answering a stored range to a request without one).
func TestQueryPartialContentIsNoNotFound(t *testing.T) {
	requireQueryAnswerNeverResent(t, shape{status: http.StatusPartialContent,
		header: http.Header{"Content-Type": {"application/json"}, "Content-Range": {"bytes 0-1/2"}}, body: `{}`})
}
