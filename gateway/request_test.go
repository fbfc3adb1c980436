package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestRequest_Member(t *testing.T) {
	params := `{"name":"a","arguments":{"name":"inner","task":1},"_meta":{"progressToken":7},"name":"last","task":{"ttl":5}}`
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"name", `"last"`, true}, // the last duplicate wins, as rawjson.Get
		{"task", `{"ttl":5}`, true},
		{"_meta", `{"progressToken":7}`, true},
	}
	req := &Request{Params: json.RawMessage(params)}
	for _, tt := range tests {
		got, ok := req.member(req.Params, tt.key)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("member(%q) = %s, %v; want %s, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}

	// The members were read once: what follows reads the memo, which
	// aliases req.Params.
	if !sameBytes(req.members.of, req.Params) {
		t.Fatal("the members of req.Params were not kept")
	}

	// Other params are read on their own, and leave the memo alone.
	other := json.RawMessage(`{"name":"other"}`)
	if got, _ := req.member(other, "name"); string(got) != `"other"` {
		t.Errorf("member of other params = %s", got)
	}
	if _, ok := req.member(other, "task"); ok {
		t.Error("other params have no task")
	}
	if got, _ := req.member(req.Params, "name"); string(got) != `"last"` {
		t.Errorf("member of req.Params after other params = %s", got)
	}

	// A copy of the request with params of its own (a background call)
	// does not read the original's bytes, which the edge reuses.
	bg := *req
	bg.Params = bytes.Clone(req.Params)
	bg.Params = bytes.Replace(bg.Params, []byte(`"last"`), []byte(`"copy"`), 1)
	for i := range req.Params {
		req.Params[i] = '#'
	}
	if got, _ := bg.member(bg.Params, "name"); string(got) != `"copy"` {
		t.Errorf("member of the copy's params = %s", got)
	}

	// Params that are not an object have no members.
	for _, p := range []string{``, `[]`, `"name"`, `{"name":`} {
		r := &Request{Params: json.RawMessage(p)}
		for _, key := range memberKeys {
			if v, ok := r.member(r.Params, key); ok {
				t.Errorf("params %q: member(%q) = %s", p, key, v)
			}
		}
	}
}
