package jsondec

// Meta returns the namespace, name and resourceVersion in the top-level
// "metadata" of the JSON object data, without decoding it: views of data,
// valid as long as data is. ok is false when Meta finds no metadata
// object, or no name and resourceVersion in it as plain strings (without
// escapes); the object must then be decoded to know them.
//
// Meta reads no further than it must: it stops once it has the name and
// the resourceVersion. The API server writes the namespace before them;
// a namespace written after them is not seen, and the object looks
// cluster-scoped (a caller that looks the object up by its key then
// misses, and decodes it). The rest of the object is not checked.
func Meta(data []byte) (namespace, name, resourceVersion string, ok bool) {
	p := parser{data: data}
	p.skipSpace()
	p.members(0, func(key string) (bool, bool) {
		if key != "metadata" || p.data[p.i] != '{' {
			return false, true
		}
		p.members(1, func(key string) (bool, bool) {
			var dst *string
			switch key {
			case "namespace":
				dst = &namespace
			case "name":
				dst = &name
			case "resourceVersion":
				dst = &resourceVersion
			default:
				return false, true
			}
			v, plain := p.plainString()
			if !plain {
				return false, true
			}
			*dst = v
			// Enough: stop the walk.
			return true, name == "" || resourceVersion == ""
		})
		return true, false // stop the walk
	})
	ok = name != "" && resourceVersion != ""
	return namespace, name, resourceVersion, ok
}

// members walks the object at p.i, calling member with p.i at each
// member's value. member reports whether it consumed the value, and if so
// whether to go on; a value it did not consume is skipped. members stops
// at the first byte that is not well-formed (a key with escapes counts as
// such), and reports whether it walked the whole object.
func (p *parser) members(depth int, member func(key string) (consumed, goOn bool)) bool {
	if depth >= maxDepth || p.i >= len(p.data) || p.data[p.i] != '{' {
		return false
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return true
	}
	for {
		p.skipSpace()
		key, plain := p.plainString()
		if !plain {
			return false
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return false
		}
		p.i++
		p.skipSpace()
		if p.i >= len(p.data) {
			return false
		}
		consumed, goOn := member(key)
		if consumed && !goOn {
			return false
		}
		if !consumed {
			if _, err := p.skipValue(depth + 1); err != nil {
				return false
			}
		}
		done, err := p.objectNext()
		if err != nil {
			return false
		}
		if done {
			return true
		}
	}
}

// plainString returns the string at p.i as a view of the input when it
// has no escapes, and consumes it. Otherwise it reports false and leaves
// p.i alone.
func (p *parser) plainString() (string, bool) {
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", false
	}
	for j := p.i + 1; j < len(p.data); j++ {
		switch c := p.data[j]; {
		case c == '"':
			s := p.view(p.i+1, j)
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}
