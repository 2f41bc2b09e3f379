package idem_test

import (
	"net/http"
	"testing"
)

// A result endpoint served from SQLite answers SQLite's own words for a
// column or a table its query names and the database lacks: "no such
// column: X", "no such table: X", a colon after the part. Datasette's
// JSON API answers a query so 400 with the error in its envelope
// (https://github.com/simonw/datasette/pull/2118: {"ok": false, …,
// "error": "no such column: blah"}; a table dropped or renamed under a
// migration gives "no such table: orders"). The query failed, whatever
// became of the order: read as the order not found, the filled order,
// its client order id in the body, was sent again once the result lag
// had passed. Each is asked again, never followed by a resend.
func TestQuerySQLiteNoSuchColumnIsNoNotFound(t *testing.T) {
	for _, tt := range []struct{ name, body string }{
		{name: "no such column", body: `{"ok":false,"database":"shop","query_name":null,"rows":[],"truncated":false,"columns":[],` +
			`"query":{"sql":"select * from orders where client_order_id = :key","params":{"key":"ord-9"}},` +
			`"error":"no such column: client_order_id","private":false,"allow_execute_sql":true,"query_ms":2.68}`},
		{name: "no such table", body: `{"ok":false,"database":"shop","query_name":null,"rows":[],"truncated":false,"columns":[],` +
			`"query":{"sql":"select * from orders where client_order_id = :key","params":{"key":"ord-9"}},` +
			`"error":"no such table: orders","private":false,"allow_execute_sql":true,"query_ms":1.02}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireQueryAnswerNeverResent(t, shape{status: http.StatusBadRequest,
				header: http.Header{"Content-Type": {"application/json; charset=utf-8"}}, body: tt.body})
		})
	}
}
