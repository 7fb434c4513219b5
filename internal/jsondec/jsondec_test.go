package jsondec

import (
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// reference decodes the way unstructured.Unstructured does.
func reference(data []byte) (map[string]interface{}, error) {
	m := make(map[string]interface{})
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

var cases = []string{
	`{}`,
	` {"a":1} `,
	`{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"w","labels":{"a":"b"},"generation":3},"spec":{"replicas":3,"ratio":0.5,"big":12345678901234567890,"exp":1e3,"neg":-7,"zero":-0,"list":[1,"two",true,false,null,{"x":[]}],"empty":{}}}`,
	`{"s":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud800 \udc00x \u0041"}`,
	"{\"utf8\":\"h\xc3\xa9llo \xff bad \xe2\x82\"}",
	`{"dup":1,"dup":2}`,
	`{"f":1.5e-10,"g":-0.0,"h":1E+2}`,
	`{"deep":[[[[[[[[[[1]]]]]]]]]]}`,
	`{"a":1}x`, `{"a":}`, `{"a" 1}`, `{"a":1,}`, `[1,2]`, `"str"`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":.5}`, `{"a":1e}`,
	`{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{"a":nul}`, `{"a":"unterminated}`, `{`, ``, `   `, `{"a":1e400}`, `{"a":[1,]}`, `{,}`,
	`{"a":"\u12"}`, `{"a":"\ud800\u12"}`, `null`,
}

func TestMatchesReference(t *testing.T) {
	for _, c := range cases {
		check(t, []byte(c))
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	check(t, []byte(`{"a":`+deep+`}`))
}

func check(t *testing.T, data []byte) {
	t.Helper()
	want, werr := reference(data)
	got, gerr := Object(data)
	if (werr == nil) != (gerr == nil) {
		if werr == nil && gerr == ErrNotObject {
			return // null decodes into an empty map upstream; we call it not an object
		}
		t.Fatalf("%q: reference error %v, ours %v", data, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nwant %#v\n got %#v", data, want, got)
	}
}

func TestStringsDoNotAliasInput(t *testing.T) {
	data := []byte(`{"name":"value","esc":"a\nb"}`)
	m, err := Object(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if m["name"] != "value" || m["esc"] != "a\nb" {
		t.Fatalf("strings changed with the input: %v", m)
	}
}

func FuzzMatchesReference(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
	})
}
