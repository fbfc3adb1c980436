package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The protocol versions this edge speaks, newest first.
const (
	V20251125 = "2025-11-25"
	V20250618 = "2025-06-18"
	V20250326 = "2025-03-26"
)

// Versions are the protocol versions the legacy edge negotiates, newest
// first.
var Versions = []string{V20251125, V20250618, V20250326}

func supported(v string) bool {
	for _, s := range Versions {
		if s == v {
			return true
		}
	}
	return false
}

// marshal encodes v as JSON without the HTML escaping of json.Marshal, so
// that "<", ">" and "&" in a message stay as the peer wrote them.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own values reach here; they always encode.
		panic(fmt.Sprintf("legacy: encoding %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// resultMessage returns the response {"jsonrpc":"2.0","id":id,"result":result}
// with result spliced in as it is: built by hand because json.Marshal would
// compact and HTML-escape the result, and 2025-11-25 clients get the
// upstream's bytes unchanged.
func resultMessage(id jsonrpc.ID, result json.RawMessage) []byte {
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	b := make([]byte, 0, len(result)+len(id.Raw())+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, idJSON(id)...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// errorMessage returns an error response. A zero id is written as null, as
// JSON-RPC asks when the request's id is unknown.
func errorMessage(id jsonrpc.ID, e *jsonrpc.Error) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, idJSON(id)...)
	b = append(b, `,"error":`...)
	b = append(b, marshal(e)...)
	return append(b, '}')
}

// notificationMessage returns a notification with params spliced in.
func notificationMessage(method string, params json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":`)
	b = append(b, marshal(method)...)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func idJSON(id jsonrpc.ID) []byte {
	if !id.IsValid() {
		return []byte("null")
	}
	return id.Raw()
}

// The members each version lacks (MCP 2025-11-25 changelog, and the
// 2025-06-18 and 2025-03-26 schemas).
var (
	// toolDrop lists, per version, the members of a Tool it does not have.
	toolDrop = map[string][]string{
		V20250618: {"icons", "execution"},
		V20250326: {"outputSchema", "title", "icons", "execution", "_meta"},
	}
)

// encodeResult returns the result of method encoded for a client of
// version (DESIGN decision 11): the core gives the newest shape, and older
// clients lose the members their revision lacks. Every other byte passes
// through. A result that does not have the expected shape passes through
// unchanged: it is the upstream's, and the client may still make sense of
// it.
//
// A 2026-07-28 server's tool may have an outputSchema that is not an
// object schema and return a structuredContent that is not an object;
// the session era has neither, so both go (the content keeps the text).
// nonObjectOutput says the tools/list result has such a schema.
func encodeResult(version, method string, result json.RawMessage, nonObjectOutput bool) json.RawMessage {
	result = withoutHopMembers(result)
	switch method {
	case "tools/list":
		drop := toolDrop[version]
		if len(drop) == 0 && !nonObjectOutput {
			return result
		}
		out, err := rawjson.MapArray(result, "tools", func(tool json.RawMessage) json.RawMessage {
			if nonObjectOutput {
				if schema, ok, _ := rawjson.Get(tool, "outputSchema"); ok && !gateway.ObjectSchema(schema) {
					if t, err := rawjson.Delete(tool, "outputSchema"); err == nil {
						tool = t
					}
				}
			}
			if len(drop) == 0 {
				return tool
			}
			if t, err := rawjson.Delete(tool, drop...); err == nil {
				return t
			}
			return tool
		})
		if err != nil {
			return result
		}
		return out
	case "tools/call":
		if version != V20250326 {
			if sc, ok, _ := rawjson.Get(result, "structuredContent"); ok && (len(sc) == 0 || sc[0] != '{') {
				if out, err := rawjson.Delete(result, "structuredContent"); err == nil {
					return out
				}
			}
			return result
		}
		// 2025-03-26 has neither structuredContent nor resource_link.
		out, err := rawjson.Delete(result, "structuredContent")
		if err != nil {
			return result
		}
		out2, err := rawjson.MapArray(out, "content", linkToText)
		if err != nil {
			return out
		}
		return out2
	case "prompts/get":
		if version != V20250326 {
			return result
		}
		// A prompt message's content block may be a resource_link too
		// (a server's, or a media link of the gateway's).
		out, err := rawjson.MapArray(result, "messages", func(msg json.RawMessage) json.RawMessage {
			block, ok, _ := rawjson.Get(msg, "content")
			if !ok {
				return msg
			}
			m2, err := rawjson.Set(msg, "content", linkToText(block))
			if err != nil {
				return msg
			}
			return m2
		})
		if err != nil {
			return result
		}
		return out
	}
	return result
}

// hopMembers are the members of a 2026-07-28 result that describe its own
// hop (its type, its cache hints), which a server of the session era may
// send too (the Go SDK's does) and a session-era client must not get.
var hopMembers = []string{"resultType", "ttlMs", "cacheScope"}

// withoutHopMembers returns result without hopMembers at its top level.
// Each is looked for by a scan first: most results have none.
func withoutHopMembers(result json.RawMessage) json.RawMessage {
	var found []string
	for _, k := range hopMembers {
		if bytes.Contains(result, []byte(`"`+k+`"`)) {
			found = append(found, k)
		}
	}
	if len(found) == 0 || len(result) == 0 || result[0] != '{' {
		return result
	}
	out, err := rawjson.Delete(result, found...)
	if err != nil {
		return result
	}
	return out
}

// linkToText turns a resource_link content block into a text block naming
// the link, "<title or name>: <uri>", for 2025-03-26 clients, which have no
// resource_link; the block's annotations are kept. Other blocks are
// returned as they are.
func linkToText(block json.RawMessage) json.RawMessage {
	if t, _ := rawjson.String(block, "type"); t != "resource_link" {
		return block
	}
	label, _ := rawjson.String(block, "title")
	if label == "" {
		label, _ = rawjson.String(block, "name")
	}
	uri, _ := rawjson.String(block, "uri")
	text := uri
	if label != "" {
		text = label + ": " + uri
	}
	out := struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Annotations json.RawMessage `json:"annotations,omitempty"`
	}{Type: "text", Text: text}
	if a, ok, _ := rawjson.Get(block, "annotations"); ok && json.Valid(a) {
		out.Annotations = a
	}
	return marshal(out)
}

// requestMessage returns a request with params spliced in.
func requestMessage(id jsonrpc.ID, method string, params json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, idJSON(id)...)
	b = append(b, `,"method":`...)
	b = append(b, marshal(method)...)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}
