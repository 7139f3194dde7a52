package status

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Reading the served page for the tests: fetch it, check its tags balance, and find
// elements by id, class and data attributes.

// fetch GETs url and returns the parsed page, failing unless it is a 200 HTML page that
// is never cached and whose tags balance.
func fetch(t *testing.T, url string) *html.Node {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET %s: %d %q %q, want 200, HTML, no-store:\n%s", url, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
	}
	balanced(t, string(body))
	doc, err := html.Parse(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// voidTags have no end tag.
var voidTags = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// balanced fails unless every start tag of page (other than void and self-closing
// ones) is closed by its own end tag, in order.
func balanced(t *testing.T, page string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(page))
	var open []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("tokenizing the page: %v", z.Err())
			}
			if len(open) > 0 {
				t.Fatalf("unclosed tags at the end of the page: %v", open)
			}
			return
		case html.StartTagToken:
			if name, _ := z.TagName(); !voidTags[string(name)] {
				open = append(open, string(name))
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if len(open) == 0 || open[len(open)-1] != string(name) {
				t.Fatalf("</%s> closes %v", name, open)
			}
			open = open[:len(open)-1]
		}
	}
}

// find returns every element under n for which match holds, in document order.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasAttr(key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool { v, ok := attr(n, key); return ok && v == val }
}

// byID returns the element with the id, or nil.
func byID(n *html.Node, id string) *html.Node {
	if found := find(n, hasAttr("id", id)); len(found) > 0 {
		return found[0]
	}
	return nil
}

// elements returns the elements of a tag with a class (any class when class is "").
func elements(n *html.Node, tag, class string) []*html.Node {
	return find(n, func(e *html.Node) bool {
		c, _ := attr(e, "class")
		return e.Data == tag && (class == "" || c == class)
	})
}

// text returns the text under n, spaces collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// rowField returns the text of the data-field element of a row in the table with the
// id, and whether there is one: the row of a tier (data-tier) or of a tenant
// (data-tenant).
func rowField(doc *html.Node, table, key, name string) (string, bool) {
	tab := byID(doc, table)
	if tab == nil {
		return "", false
	}
	for _, row := range find(tab, func(n *html.Node) bool { return hasAttr("data-tier", key)(n) || hasAttr("data-tenant", key)(n) }) {
		if f := find(row, hasAttr("data-field", name)); len(f) > 0 {
			return text(f[0]), true
		}
	}
	return "", false
}

// rowCells counts the cells (th and td) of the row of a tier or tenant in tab; -1 when
// there is no such row.
func rowCells(tab *html.Node, key string) int {
	rows := find(tab, func(n *html.Node) bool { return hasAttr("data-tier", key)(n) || hasAttr("data-tenant", key)(n) })
	if len(rows) == 0 {
		return -1
	}
	return len(find(rows[0], func(n *html.Node) bool { return n.Data == "th" || n.Data == "td" }))
}
