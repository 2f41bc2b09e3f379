package idem

import "testing"

// An answer is the request handed back only when it is the request's
// value, whatever its bytes: the API's own answer about the order adds
// its members (an id, a status) or says another value, and is read.
func TestEchoesRequest(t *testing.T) {
	const req = `{"id":"ord-9","side":"BUY","amount":10.00,"legs":[{"a":1,"b":"x"},{"a":2}]}`
	for _, tc := range []struct {
		name, request, answer string
		want                  bool
	}{
		{"the same bytes", req, req, true},
		{"members reordered, nested too", req, `{"legs":[{"b":"x","a":1},{"a":2}],"amount":10,"side":"BUY","id":"ord-9"}`, true},
		{"escaped otherwise", req, `{"id":"ord\u002d9","side":"B\u0055Y","amount":1e1,"legs":[{"a":1.0,"b":"x"},{"a":2}]}`, true},
		{"the order's id added", req, `{"order_id":"o_1","id":"ord-9","side":"BUY","amount":10.00,"legs":[{"a":1,"b":"x"},{"a":2}]}`, false},
		{"a status added", req, `{"status":"FILLED","id":"ord-9","side":"BUY","amount":10.00,"legs":[{"a":1,"b":"x"},{"a":2}]}`, false},
		{"a member missing", req, `{"id":"ord-9","side":"BUY","amount":10.00}`, false},
		{"another amount", req, `{"id":"ord-9","side":"BUY","amount":10.01,"legs":[{"a":1,"b":"x"},{"a":2}]}`, false},
		{"a number for a string", req, `{"id":"ord-9","side":"BUY","amount":"10.00","legs":[{"a":1,"b":"x"},{"a":2}]}`, false},
		{"legs in another order", req, `{"id":"ord-9","side":"BUY","amount":10.00,"legs":[{"a":2},{"a":1,"b":"x"}]}`, false},
		{"two documents", req, req + req, false},
		{"not JSON", req, `<html>Found</html>`, false},
		{"a form written back", "id=ord-9&tag=a&tag=b&qty=1.50", `{"qty":"1.50","tag":["a","b"],"id":"ord-9"}`, true},
		{"a form, numbers parsed", "id=ord-9&qty=1.50", `{"qty":1.5,"id":"ord-9"}`, true},
		{"a form, the order's id added", "id=ord-9&qty=1.50", `{"qty":"1.50","id":"ord-9","orderId":"o_1"}`, false},
		{"a form, another value", "id=ord-9&qty=1.50", `{"qty":"1.60","id":"ord-9"}`, false},
		{"a bracketed form, nested", "id=ord-9&order[amount]=10.00&order[meta][note]=x", `{"order":{"meta":{"note":"x"},"amount":"10.00"},"id":"ord-9"}`, true},
		{"a list form", "id=ord-9&tag[]=a&tag[]=b", `{"id":"ord-9","tag":["b","a"]}`, true},
		{"a list form, numbers parsed", "id=ord-9&qty[]=1.50&qty[]=1.5", `{"id":"ord-9","qty":["1.5",1.50]}`, true},
		{"an indexed form, as a list", "id=ord-9&it[0][ref]=a&it[1][ref]=b", `{"id":"ord-9","it":[{"ref":"a"},{"ref":"b"}]}`, true},
		{"an indexed form, as an object", "id=ord-9&it[3][ref]=a&it[7][ref]=b", `{"id":"ord-9","it":{"3":{"ref":"a"},"7":{"ref":"b"}}}`, true},
		{"a value with a semicolon", "id=ord-9&note=a;b", `{"id":"ord-9","note":"a;b"}`, true},
		{"a bracketed form, the order's id added", "id=ord-9&order[amount]=10.00", `{"id":"ord-9","order":{"amount":"10.00","id":"o_1"}}`, false},
		{"a bracketed form, another value", "id=ord-9&order[amount]=10.00", `{"id":"ord-9","order":{"amount":"10.01"}}`, false},
		{"a bracketed form, not nested", "id=ord-9&order[amount]=10.00", `{"id":"ord-9","amount":"10.00"}`, false},
		{"a list form, a value twice", "id=ord-9&tag[]=a&tag[]=b", `{"id":"ord-9","tag":["a","a"]}`, false},
		{"a list form, a value left out", "id=ord-9&tag[]=a&tag[]=b", `{"id":"ord-9","tag":["a"]}`, false},
		{"a form, a null added", "id=ord-9&qty=1", `{"id":"ord-9","qty":"1","order":null}`, false},
		{"a form, an empty object added", "id=ord-9&qty=1", `{"id":"ord-9","qty":"1","order":{}}`, false},
		{"a form, an unclosed bracket", "id=ord-9&order[amount=1", `{"id":"ord-9","order":{"amount":"1"}}`, false},
		{"a form, a bad escape", "id=ord-9&note=%zz", `{"id":"ord-9","note":"%zz"}`, false},
		{"a form as PHP names it", "id=ord-9&order.ref=o1&first+name=x", `{"id":"ord-9","order_ref":"o1","first_name":"x"}`, true},
		{"a form as PHP names it, another value", "id=ord-9&order.ref=o1", `{"id":"ord-9","order_ref":"o2"}`, false},
		{"a repeated name, PHP's last value", "id=ord-9&tag=a&tag=b", `{"id":"ord-9","tag":"b"}`, true},
		{"a repeated name, the first value alone", "id=ord-9&tag=a&tag=b", `{"id":"ord-9","tag":"a"}`, false},
		{"a repeated name, as a list of the same", "id=ord-9&tag=b&tag=b", `{"id":"ord-9","tag":["b","b"]}`, true},
		{"nothing sent, nothing answered", "", "", true},
		{"nothing sent, an object answered", "", `{}`, false},
	} {
		if got := echoesRequest([]byte(tc.request), []byte(tc.answer)); got != tc.want {
			t.Errorf("%s: echoesRequest = %v, want %v", tc.name, got, tc.want)
		}
	}
}
