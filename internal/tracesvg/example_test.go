package tracesvg_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loom-k8s/loom/internal/tracesvg"
)

func ExampleRender() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	spans := []tracesvg.Span{
		{ID: "3", Parent: "1", Name: "INSERT audit", Service: "db", Start: ms(40), End: ms(55)},
		{ID: "1", Name: "POST /orders", Service: "api", Start: ms(0), End: ms(60), Note: "201"},
		{ID: "2", Parent: "1", Name: "check <quota>", Service: "policy", Start: ms(2), End: ms(9), Note: "allowed"},
		{ID: "4", Parent: "2", Name: "load rules", Service: "policy", Start: ms(3), End: ms(3)},
	}
	var svg bytes.Buffer
	if err := tracesvg.Render(&svg, spans, tracesvg.Options{Title: "Create an order"}); err != nil {
		fmt.Println(err)
		return
	}

	// Print the span names in the order of the rows, indented by depth.
	d := xml.NewDecoder(&svg)
	depth, inName := "", false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			for _, a := range tok.Attr {
				switch {
				case a.Name.Local == "data-depth":
					depth = a.Value
				case a.Name.Local == "class" && a.Value == "name":
					inName = true
				}
			}
		case xml.CharData:
			if inName {
				var n int
				fmt.Sscan(depth, &n)
				fmt.Println(strings.Repeat("  ", n) + string(tok))
				inName = false
			}
		}
	}
	// Output:
	// POST /orders
	//   check <quota>
	//     load rules
	//   INSERT audit
}
