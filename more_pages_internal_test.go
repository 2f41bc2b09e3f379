package idem

import (
	"fmt"
	"net/http"
	"testing"
)

// A page whose pager says more follow is a query that failed, not a
// "not found", whether idem read it or a Decoder said ErrResultNotFound:
// the driver resends a client order id, and fails a payment refused
// "order already paid" (attempt.go's orderPaidNotFoundWithin), only on a
// not-found that is not failed.
func TestJudgeQueryPageWithMoreIsNoNotFound(t *testing.T) {
	notFound := fmt.Errorf("no order on the page: %w", ErrResultNotFound)
	for _, tt := range []struct {
		name   string
		a      answer
		failed bool
	}{
		{"a decoder's not found, more follow", answer{status: 200, decodeErr: notFound, morePages: true}, true},
		{"a decoder's not found, the last page", answer{status: 200, decodeErr: notFound}, false},
		{"a search that found nothing, more follow", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"data":[],"has_more":true}`), morePages: true}, true},
		{"a search that found nothing, the last page", answer{status: 200, decodeErr: errUndecodable, body: []byte(`{"data":[],"has_more":false}`)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := judgeQuery(past{maybeExecuted: true}, tt.a)
			if j.move != moveInconclusive || j.failed != tt.failed {
				t.Fatalf("judgeQuery() = move %d failed %v; want %d %v", j.move, j.failed, moveInconclusive, tt.failed)
			}
		})
	}
}

func TestMorePages(t *testing.T) {
	for _, tt := range []struct {
		name string
		link string
		body string
		want bool
	}{
		{"has_more true", "", `{"object":"list","data":[],"has_more":true}`, true},
		{"has_more false beside a next link", "", `{"data":[],"meta":{"pagination":{"next":"https://x/?after=1","has_more":false}}}`, false},
		{"hasNextPage in a GraphQL connection", "", `{"data":{"orders":{"edges":[],"pageInfo":{"hasNextPage":true,"endCursor":"c1"}}}}`, true},
		{"Azure's nextLink", "", `{"value":[],"nextLink":"https://management.azure.com/x?$skiptoken=1"}`, true},
		{"OData's @odata.nextLink", "", `{"value":[],"@odata.nextLink":"https://graph.microsoft.com/v1.0/x?$skiptoken=1"}`, true},
		{"Adyen's _links.next", "", `{"data":[],"_links":{"next":{"href":"https://balanceplatform-api-test.adyen.com/btl/v4/transactions?cursor=S2B"}}}`, true},
		{"an empty cursor", "", `{"orders":[],"cursor":""}`, false},
		{"a blank token", "", `{"orders":[],"next_page_token":"  "}`, false},
		{"a next page's number", "", `{"items":[],"next_page":2}`, true},
		{"no next page's number", "", `{"items":[],"next_page":null}`, false},
		{"the last of total_pages", "", `{"transaction_details":[],"page":3,"total_pages":3}`, false},
		{"a current_page before last_page", "", `{"current_page":2,"last_page":4,"data":[]}`, true},
		{"the last_page", "", `{"current_page":4,"last_page":4,"data":[],"next_page_url":null}`, false},
		{"KuCoin's currentPage before totalPage", "", `{"code":"200000","data":{"currentPage":1,"pageSize":50,"totalNum":120,"totalPage":3,"items":[]}}`, true},
		{"KuCoin's empty search", "", `{"code":"200000","data":{"currentPage":1,"pageSize":50,"totalNum":0,"totalPage":0,"items":[]}}`, false},
		// Two members of one kind: the name first in pageNumbers or
		// pageCounts that holds a number decides, whatever the map's
		// order (the older read took whichever it came to last).
		{"page before current_page", "", `{"page":2,"current_page":4,"total_pages":4,"data":[]}`, true},
		{"page before current_page, the last", "", `{"page":4,"current_page":2,"total_pages":4,"data":[]}`, false},
		{"total_pages before last_page", "", `{"page":2,"total_pages":4,"last_page":2,"data":[]}`, true},
		{"a page that is no number gives way", "", `{"page":{"size":20},"current_page":1,"last_page":4,"data":[]}`, true},
		{"two spellings of page: byte order", "", `{"Page":1,"page":4,"total_pages":4,"data":[]}`, true},
		{"a NextToken", "", `{"Orders":[],"NextToken":"eyJ2IjoxfQ=="}`, true},
		{"Laravel's next_page_url alone", "", `{"data":[],"next_page_url":"https://x/?page=2"}`, true},
		{"Stripe's last search page", "", `{"object":"search_result","has_more":false,"data":[]}`, false},
		{"inside an array is not the search's pager", "", `{"orders":[{"id":"o-1","refunds":{"object":"list","has_more":true}}]}`, false},
		{"deeper than three levels", "", `{"a":{"b":{"c":{"d":{"has_more":true}}}}}`, false},
		{"an array body", "", `[{"has_more":true}]`, false},
		{"Link rel=next unquoted", `<https://x/?page=2>; rel=next`, `{"orders":[]}`, true},
		{"Link rel holding next among others", `<https://x/?page=2>; rel="next last"`, `{"orders":[]}`, true},
		{"Link prev and first only", `<https://x/?page=1>; rel="prev", <https://x/?page=1>; rel="first"`, `{"orders":[]}`, false},
		{"Link rel=nextpage is not next", `<https://x/?page=2>; rel="nextpage"`, `{"orders":[]}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.link != "" {
				h.Set("Link", tt.link)
			}
			if got := morePages(h, []byte(tt.body)); got != tt.want {
				t.Fatalf("morePages(%q, %s) = %v; want %v", tt.link, tt.body, got, tt.want)
			}
		})
	}
}
