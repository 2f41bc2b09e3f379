package idem

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// routerRedirect returns where a redirect of a submit to reqURL points,
// when the redirect can only come from a router or a front end, answered
// before any handler ran: a 301, 307 or 308 to the same URL but for a
// trailing slash added or removed (FastAPI's redirect_slashes, 307;
// Werkzeug's strict_slashes, 308; Django's APPEND_SLASH, 301), or one of
// them or a 302 for http upgraded to https (a load balancer's: Azure
// Front Door's redirect types include 302). No handler ran, so nothing
// executed. It returns "" for any other answer: a redirect elsewhere (to
// the created resource, to a login page, a 303), or a 302 to the slash's
// other side (a handler's Post/Redirect/Get), may follow a handler's
// work. sentQuery is reqURL's query string as
// sent, with what the request hook added (an API key): a router keeps it
// in the Location (Django's APPEND_SLASH), and the URL returned has
// reqURL's instead, never the hook's additions.
func routerRedirect(reqURL, sentQuery string, status int, h http.Header) string {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return ""
	}
	loc := headerValue(h, "Location")
	if loc == "" {
		return ""
	}
	from, err := url.Parse(reqURL)
	if err != nil {
		return ""
	}
	to, err := from.Parse(loc)
	if err != nil || to.User != nil || to.RawQuery != sentQuery || !strings.EqualFold(to.Hostname(), from.Hostname()) {
		return ""
	}
	upgrade := from.Scheme == "http" && to.Scheme == "https"
	switch {
	case upgrade:
		if p := to.Port(); p != "" && p != "443" {
			return ""
		}
	case to.Scheme != from.Scheme || portOf(to) != portOf(from):
		return ""
	}
	fp, tp := from.EscapedPath(), to.EscapedPath()
	switch {
	case fp == tp && !upgrade: // a redirect to itself says nothing
		return ""
	case fp != tp && fp+"/" != tp && tp+"/" != fp:
		return ""
	case fp != tp && status == http.StatusFound:
		// A router that runs one handler for both paths (Express's, not
		// strict by default) leaves the redirect to the handler, after
		// its work: its Post/Redirect/Get, 302 by default (Express's
		// res.redirect), to the path as the app spells it.
		return ""
	}
	to.RawQuery = from.RawQuery
	return to.String()
}

// portOf is u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// notFollowed is why a redirect settled nothing, for the attempt's
// journaled error: where it points and what to do. A login page or
// another host behind a submit or a result query is an intermediary's
// (an SSO proxy, a captive portal) or a moved API's, and no attempt will
// ever get past it; without this, the journal showed a bare 302 until
// the reconciliation deadline. The target is shown without its query
// string and user info: a login redirect may carry a token. nil for an
// answer that is no redirect with a Location.
func notFollowed(a answer) error {
	if a.status < 300 || a.status > 399 || a.location == "" {
		return nil
	}
	to := "an unparsable Location"
	if u, err := url.Parse(a.location); err == nil {
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		to = truncate(u.String(), 200)
	}
	return fmt.Errorf("idem: %d redirect to %s, not followed: idem sends only to the journaled URL. "+
		"A redirect to a login page or another host comes from a proxy in between or a moved API: fix the route or the URL; "+
		"until then the operation stays open, queried and resent with the same key", a.status, to)
}
