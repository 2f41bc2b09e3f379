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
// Werkzeug's strict_slashes, 308; Django's APPEND_SLASH, 301), or for
// http upgraded to https (a load balancer). No handler ran, so nothing
// executed. It returns "" for any other answer: a redirect elsewhere (to
// the created resource, to a login page, a 303) may follow a handler's
// work, and so may a 302, a handler's Post/Redirect/Get by default
// (Express's res.redirect, Laravel's redirect()->route), to the path as
// the app spells it (Express runs one handler for /orders and /orders/)
// or in https (Laravel's URLs after URL::forceScheme('https')). A front
// end's 302 upgrade (ASP.NET Core's AddRedirectToHttps) is then one more
// 3xx: resent with the same key, nothing executing, until the key window
// passes and a person settles it. sentQuery is reqURL's query string as
// sent, with what the request hook added (an API key): a router keeps it
// in the Location (Django's APPEND_SLASH), and the URL returned has
// reqURL's instead, never the hook's additions.
func routerRedirect(reqURL, sentQuery string, status int, h http.Header) string {
	switch status {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
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
