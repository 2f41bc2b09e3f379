package idem

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// morePages reports whether a result query's 2xx is one page of a list
// or search that says more pages follow: a Link header to rel="next"
// (RFC 8288: Shopify's and GitHub's lists), or, in the body's top level
// or its objects up to three levels down (Bybit's result.nextPageCursor,
// Paddle's meta.pagination, a GraphQL connection's pageInfo), a true
// "has_more", "has_next" or "hasNextPage" (Stripe's lists and searches,
// Coinbase's), or, where no such flag is, a next page's token, cursor or
// link that is not empty (Google's next_page_token, Square's cursor,
// Azure's nextLink, Adyen's _links.next, Laravel's next_page_url, AWS's
// NextToken), or a "page" before its "total_pages" (PayPal's
// transaction search) or "current_page" before "last_page" (Laravel).
// Such a page not holding the key is no "not found": the order may be on
// a later one (a filter matching others too, or ignored, answering the
// account's latest orders), and a search may stop short of it with
// nothing on the page (Google's AIP-158: fewer results than asked,
// "including zero results", a next_page_token beside them). Not inside arrays: a listed resource's
// own nested list (a payment's refunds) pages nothing of the search's.
func morePages(h http.Header, body []byte) bool {
	if linkNext(h) {
		return true
	}
	body = bytes.TrimSpace(trimBOM(body))
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var top map[string]json.RawMessage
	return json.Unmarshal(body, &top) == nil && pagerSaysMore(top, 3)
}

// pageFlags and pageTokens are the bare names (bareName) of a pager's
// "more follow" flag and of its next page's token, cursor or link.
var (
	pageFlags  = []string{"hasmore", "hasnext", "hasnextpage"}
	pageTokens = []string{"nextpagetoken", "nextpagecursor", "nextcursor", "nextpage", "nextpageurl", "nexttoken", "nextlink", "@odata.nextlink", "next", "cursor"}
	// pageNumbers and pageCounts name a page's number and the number of
	// pages (or the last page's): Laravel's paginator writes
	// current_page and last_page, Flutterwave's page_info current_page
	// and total_pages, KuCoin currentPage and totalPage. Each in the
	// order pageNumber reads them: an earlier name decides.
	pageNumbers = []string{"page", "currentpage"}
	pageCounts  = []string{"totalpages", "totalpage", "lastpage"}
)

// pagerSaysMore is morePages of one object, obj, and of the objects it
// holds down to depth more levels. A flag decides for its object
// whatever else is in it or below: Paddle's "next" is "always returned,
// even if has_more is false".
func pagerSaysMore(obj map[string]json.RawMessage, depth int) bool {
	var page, pages pageNumber
	flag, flagged, token := false, false, false
	for name, raw := range obj {
		switch n := bareName(name); {
		case slices.Contains(pageFlags, n):
			var b bool
			if json.Unmarshal(raw, &b) == nil {
				flag, flagged = flag || b, true
			}
		case slices.Contains(pageTokens, n):
			token = token || tokenGiven(raw)
		case slices.Contains(pageNumbers, n):
			page.offer(slices.Index(pageNumbers, n), name, raw)
		case slices.Contains(pageCounts, n):
			pages.offer(slices.Index(pageCounts, n), name, raw)
		}
	}
	if flagged {
		return flag
	}
	if token || page.set && pages.set && page.n < pages.n {
		return true
	}
	if depth == 0 {
		return false
	}
	for _, raw := range obj {
		var inner map[string]json.RawMessage
		if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &inner) == nil && pagerSaysMore(inner, depth-1) {
			return true
		}
	}
	return false
}

// tokenGiven reports whether a next page's token, cursor or link holds
// something: not null, false, 0, an empty or blank string, {} or [].
func tokenGiven(raw json.RawMessage) bool {
	switch v := strings.TrimSpace(string(raw)); v {
	case "", "null", "false", "0", "{}", "[]":
		return false
	default:
		var s string
		return json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) != ""
	}
}

// pageNumber is a page's number, or the number of pages (or the last
// page's), as one of an object's members gives it: the member whose name
// comes first in pageNumbers or pageCounts, of those that hold a JSON
// number, and of two spellings of one name (page, Page) the first in
// byte order. Not whichever the map's iteration came to last: an object
// with both "page" and "current_page", or one of them not a number, read
// "more follow" on one call and not on the next.
type pageNumber struct {
	rank int    // the name's index in its list
	name string // the member's name as written
	n    float64
	set  bool
}

// offer keeps member name, whose bare name is at index rank of its list,
// if raw is a JSON number (null reads as 0, as it always has) and the
// member comes before the one kept.
func (p *pageNumber) offer(rank int, name string, raw json.RawMessage) {
	var n float64
	if json.Unmarshal(raw, &n) != nil {
		return
	}
	if p.set && (p.rank < rank || p.rank == rank && p.name < name) {
		return
	}
	*p = pageNumber{rank: rank, name: name, n: n, set: true}
}

// linkNext reports whether a Link header (RFC 8288) has a link whose
// rel holds "next": rel="next", rel=next, rel="next last".
func linkNext(h http.Header) bool {
	for _, v := range h.Values("Link") {
		for _, param := range strings.Split(v, ";") {
			param = strings.TrimSpace(param)
			if len(param) < 4 || !strings.EqualFold(param[:4], "rel=") {
				continue
			}
			rel := param[4:]
			if strings.HasPrefix(rel, `"`) {
				rel = rel[1:]
				if end := strings.IndexByte(rel, '"'); end >= 0 {
					rel = rel[:end]
				}
			} else if end := strings.IndexAny(rel, ", "); end >= 0 {
				rel = rel[:end]
			}
			for _, r := range strings.Fields(rel) {
				if strings.EqualFold(r, "next") {
					return true
				}
			}
		}
	}
	return false
}
