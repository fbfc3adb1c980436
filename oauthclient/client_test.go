package oauthclient

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
)

// memStore is the Store of these tests.
type memStore struct {
	mu      sync.Mutex
	tokens  map[[2]string][]byte
	clients map[[2]string][]byte
}

func newMemStore() *memStore {
	return &memStore{tokens: map[[2]string][]byte{}, clients: map[[2]string][]byte{}}
}

func (m *memStore) GetOAuthToken(_ context.Context, server, principal string) (store.OAuthToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.tokens[[2]string{server, principal}]
	if !ok {
		return store.OAuthToken{}, store.ErrNotFound
	}
	return store.OAuthToken{Server: server, Principal: principal, Data: d}, nil
}

func (m *memStore) PutOAuthToken(_ context.Context, t store.OAuthToken) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[[2]string{t.Server, t.Principal}] = t.Data
	return nil
}

func (m *memStore) DeleteOAuthToken(_ context.Context, server, principal string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tokens[[2]string{server, principal}]; !ok {
		return store.ErrNotFound
	}
	delete(m.tokens, [2]string{server, principal})
	return nil
}

func (m *memStore) DeleteOAuthTokens(_ context.Context, server string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.tokens {
		if k[0] == server {
			delete(m.tokens, k)
			n++
		}
	}
	return n, nil
}

func (m *memStore) CountOAuthTokens(ctx context.Context, server string) (int, error) {
	ps, _ := m.ListOAuthPrincipals(ctx, server)
	return len(ps), nil
}

func (m *memStore) ListOAuthPrincipals(_ context.Context, server string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.tokens {
		if k[0] == server && k[1] != "" {
			out = append(out, k[1])
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *memStore) GetOAuthClient(_ context.Context, server, issuer string) (store.OAuthClient, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.clients[[2]string{server, issuer}]
	if !ok {
		return store.OAuthClient{}, store.ErrNotFound
	}
	return store.OAuthClient{Server: server, Issuer: issuer, Data: d}, nil
}

func (m *memStore) PutOAuthClient(_ context.Context, c store.OAuthClient) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients[[2]string{c.Server, c.Issuer}] = c.Data
	return nil
}

func (m *memStore) DeleteOAuthClients(_ context.Context, server string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.clients {
		if k[0] == server {
			delete(m.clients, k)
		}
	}
	return nil
}

// fakeAS is an authorization server and the resource it protects, small
// and strict: PKCE S256, resource, rotation, revocation, iss.
type fakeAS struct {
	t        *testing.T
	as, rs   *httptest.Server
	mu       sync.Mutex
	codes    map[string]codeGrant
	access   map[string]grant // valid access tokens
	refresh  map[string]grant
	n        int
	stats    map[string]int
	badIss   bool // answers with another iss
	dcr      bool
	clientID string
}

type codeGrant struct {
	grant
	challenge, redirect, resource string
}

type grant struct {
	user   string
	scopes []string
}

func newFakeAS(t *testing.T) *fakeAS {
	f := &fakeAS{t: t, codes: map[string]codeGrant{}, access: map[string]grant{}, refresh: map[string]grant{}, stats: map[string]int{}, clientID: "gw"}
	f.as = httptest.NewServer(http.HandlerFunc(f.serveAS))
	f.rs = httptest.NewServer(http.HandlerFunc(f.serveRS))
	t.Cleanup(f.as.Close)
	t.Cleanup(f.rs.Close)
	return f
}

func (f *fakeAS) resource() string { return f.rs.URL + "/mcp" }

func (f *fakeAS) next(prefix string) string {
	f.n++
	return fmt.Sprintf("%s-%d", prefix, f.n)
}

func (f *fakeAS) serveAS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		meta := map[string]any{"issuer": f.as.URL, "authorization_endpoint": f.as.URL + "/authorize", "token_endpoint": f.as.URL + "/token",
			"revocation_endpoint": f.as.URL + "/revoke", "code_challenge_methods_supported": []string{"S256"},
			"authorization_response_iss_parameter_supported": true, "scopes_supported": []string{"read", "write", "offline_access"},
			"response_types_supported": []string{"code"}}
		if f.dcr {
			meta["registration_endpoint"] = f.as.URL + "/register"
		}
		writeJSON(w, 200, meta)
	case "/register":
		f.stats["register"]++
		writeJSON(w, 201, map[string]any{"client_id": "dyn-" + f.next("c"), "token_endpoint_auth_method": "none"})
	case "/authorize":
		f.stats["authorize"]++
		if q.Get("code_challenge_method") != "S256" || q.Get("resource") != f.resource() {
			http.Error(w, "bad request", 400)
			return
		}
		code := f.next("code")
		f.codes[code] = codeGrant{grant: grant{user: "alice", scopes: strings.Fields(q.Get("scope"))}, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), resource: q.Get("resource")}
		iss := f.as.URL
		if f.badIss {
			iss = "https://evil.example"
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {iss}}.Encode(), http.StatusFound)
	case "/token":
		r.ParseForm()
		if r.PostForm.Get("resource") != f.resource() {
			writeJSON(w, 400, map[string]string{"error": "invalid_target"})
			return
		}
		var g grant
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			cg, ok := f.codes[r.PostForm.Get("code")]
			delete(f.codes, r.PostForm.Get("code"))
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != cg.challenge {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			g = cg.grant
		case "refresh_token":
			f.stats["refresh"]++
			old, ok := f.refresh[r.PostForm.Get("refresh_token")]
			if !ok {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(f.refresh, r.PostForm.Get("refresh_token")) // rotation
			g = old
		default:
			writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		at, rt := f.next("at"), f.next("rt")
		f.access[at], f.refresh[rt] = g, g
		writeJSON(w, 200, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600, "scope": strings.Join(g.scopes, " ")})
	case "/revoke":
		r.ParseForm()
		f.stats["revoke"]++
		delete(f.access, r.PostForm.Get("token"))
		delete(f.refresh, r.PostForm.Get("token"))
		w.WriteHeader(200)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAS) serveRS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
		writeJSON(w, 200, map[string]any{"resource": f.resource(), "authorization_servers": []string{f.as.URL}, "scopes_supported": []string{"read"}})
		return
	}
	g, ok := f.access[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+f.rs.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(401)
		return
	}
	if r.URL.Query().Has("write") && !slices.Contains(g.scopes, "write") {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="read write"`)
		w.WriteHeader(403)
		return
	}
	fmt.Fprint(w, g.user)
}

// expireAll makes every access token unknown, as an expiry would.
func (f *fakeAS) expireAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.access)
}

func (f *fakeAS) revokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.access)
	clear(f.refresh)
}

func (f *fakeAS) stat(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats[k]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// gateway is a Client behind an httptest server, as the gateway mounts it.
func newGateway(t *testing.T, f *fakeAS, oauth config.ServerOAuth) (*Client, *memStore, *[]string) {
	c, st, connected, _ := newGatewayServer(t, f, oauth)
	return c, st, connected
}

// newGatewayServer is newGateway that also returns the server's config,
// which the test may change.
func newGatewayServer(t *testing.T, f *fakeAS, oauth config.ServerOAuth) (*Client, *memStore, *[]string, *config.Server) {
	t.Helper()
	var handler http.Handler
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(gw.Close)
	srv := config.Server{Name: "notes", Transport: config.TransportHTTP, URL: f.resource(), OAuth: &oauth, SessionMode: config.SessionPerPrincipal}
	st := newMemStore()
	var mu sync.Mutex
	var connected []string
	c, err := New(Options{
		PublicURL: gw.URL, Secret: []byte(strings.Repeat("k", 32)), Store: st,
		Servers: func(name string) (config.Server, bool) { return srv, name == srv.Name },
		OnConnected: func(server, principal, id string) {
			mu.Lock()
			defer mu.Unlock()
			connected = append(connected, server+"/"+principal+"/"+id)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	handler = c.Handler()
	return c, st, &connected, &srv
}

func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

// call makes one request to the resource through the Client's transport.
func call(t *testing.T, c *Client, f *fakeAS, principal, query string) (string, error) {
	t.Helper()
	srv, _ := c.opts.Servers("notes")
	hc := &http.Client{Transport: c.Transport(srv, principal, nil)}
	resp, err := hc.Post(f.resource()+query, "application/json", strings.NewReader(`{}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

func connectRequired(t *testing.T, err error) *ConnectRequired {
	t.Helper()
	var cr *ConnectRequired
	if !errors.As(err, &cr) {
		t.Fatalf("err = %v, want ConnectRequired", err)
	}
	return cr
}

func open(t *testing.T, b *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestConnectRefreshRevoke(t *testing.T) {
	f := newFakeAS(t)
	c, st, connected := newGateway(t, f, config.ServerOAuth{ClientID: "gw"})
	ctx := t.Context()

	cr := connectRequired(t, c.Check(ctx, "notes", "alice", ""))
	if cr.Principal != "alice" || !strings.Contains(cr.Error(), cr.URL) || !strings.HasPrefix(cr.URL, c.public.String()+StartPath) {
		t.Fatalf("ConnectRequired = %+v", cr)
	}
	if _, err := call(t, c, f, "alice", ""); err == nil {
		t.Fatal("a call without a connected account went through")
	}
	if code, body := open(t, browser(t), cr.URL); code != 200 || !strings.Contains(body, "return to your agent") {
		t.Fatalf("connect: %d %s", code, body)
	}
	if got := *connected; len(got) != 1 || got[0] != "notes/alice/"+cr.ElicitationID {
		t.Fatalf("OnConnected calls = %v", got)
	}
	if err := c.Check(ctx, "notes", "alice", ""); err != nil {
		t.Fatalf("Check after connecting: %v", err)
	}
	if got, err := call(t, c, f, "alice", ""); err != nil || got != "alice" {
		t.Fatalf("call = %q, %v", got, err)
	}
	if n, _ := c.Count(ctx, "notes"); n != 1 {
		t.Fatalf("Count = %d", n)
	}
	// Sealed at rest: the store never holds the token in the clear.
	for _, d := range st.tokens {
		if strings.Contains(string(d), "at-") || strings.Contains(string(d), "rt-") {
			t.Fatal("a stored token is readable")
		}
	}
	// Bob is not Alice.
	connectRequired(t, c.Check(ctx, "notes", "bob", ""))

	f.expireAll()
	if got, err := call(t, c, f, "alice", ""); err != nil || got != "alice" || f.stat("refresh") != 1 {
		t.Fatalf("after expiry: call = %q, %v; refreshes %d", got, err, f.stat("refresh"))
	}

	// Step-up: the server wants more than was granted.
	_, err := call(t, c, f, "alice", "?write")
	cr = connectRequired(t, err)
	if !strings.Contains(cr.Reason, "write") {
		t.Fatalf("step-up reason %q", cr.Reason)
	}

	f.revokeAll()
	_, err = call(t, c, f, "alice", "")
	connectRequired(t, err)
	if ok, _ := c.Connected(ctx, "notes", "alice"); ok {
		t.Fatal("a refused token is still kept")
	}
}

func TestCallbackRefusals(t *testing.T) {
	f := newFakeAS(t)
	c, _, _ := newGateway(t, f, config.ServerOAuth{ClientID: "gw"})
	ctx := t.Context()
	alice := connectRequired(t, c.Check(ctx, "notes", "alice", ""))

	// The AS's redirect, caught instead of followed: the callback URL with
	// alice's state.
	stop := &http.Client{Jar: browser(t).Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := stop.Get(alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = stop.Get(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callback := resp.Header.Get("Location")
	if !strings.Contains(callback, CallbackPath) {
		t.Fatalf("AS redirected to %q", callback)
	}
	// Another browser (bob's) presenting alice's callback is refused.
	if code, body := open(t, browser(t), callback); code != http.StatusForbidden || !strings.Contains(body, "another browser") {
		t.Fatalf("callback in another browser: %d %s", code, body)
	}
	if ok, _ := c.Connected(ctx, "notes", "alice"); ok {
		t.Fatal("connected through another browser's callback")
	}
	for _, bad := range []string{"", "?state=forged", "?state=" + url.QueryEscape(strings.TrimPrefix(alice.URL, c.public.String()+StartPath))} {
		if code, _ := open(t, browser(t), c.public.String()+CallbackPath+bad); code != http.StatusBadRequest {
			t.Errorf("callback %q: %d, want 400", bad, code)
		}
	}

	// A response naming another issuer is refused (RFC 9207).
	f.badIss = true
	alice = connectRequired(t, c.Check(ctx, "notes", "alice", ""))
	if code, body := open(t, browser(t), alice.URL); code != http.StatusBadGateway || !strings.Contains(body, "issuer") {
		t.Fatalf("bad iss: %d %s", code, body)
	}
	if ok, _ := c.Connected(ctx, "notes", "alice"); ok {
		t.Fatal("connected despite a wrong iss")
	}
}

func TestDynamicRegistrationAndDisconnect(t *testing.T) {
	f := newFakeAS(t)
	f.dcr = true
	c, st, _ := newGateway(t, f, config.ServerOAuth{})
	ctx := t.Context()
	for _, p := range []string{"alice", "bob"} {
		cr := connectRequired(t, c.Check(ctx, "notes", p, ""))
		if code, body := open(t, browser(t), cr.URL); code != 200 {
			t.Fatalf("connect %s: %d %s", p, code, body)
		}
	}
	if n := f.stat("register"); n != 1 {
		t.Fatalf("registered %d times, want once (kept in the store)", n)
	}
	if len(st.clients) != 1 {
		t.Fatalf("%d registrations stored", len(st.clients))
	}
	if err := c.Disconnect(ctx, "notes", "alice"); err != nil {
		t.Fatal(err)
	}
	if f.stat("revoke") != 2 {
		t.Fatalf("revocations = %d, want 2 (refresh and access token)", f.stat("revoke"))
	}
	if err := c.Disconnect(ctx, "notes", "alice"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("second Disconnect: %v", err)
	}
	if n, _ := c.Count(ctx, "notes"); n != 1 {
		t.Fatalf("Count = %d, want 1 (bob)", n)
	}
	// The gateway's own client lists with bob's account now.
	if got, err := call(t, c, f, "", ""); err != nil || got != "alice" { // the fake AS names every user alice
		t.Fatalf("catalog call = %q, %v", got, err)
	}
}

// TestTokenStaysWithItsServer: after an admin points the server at another
// origin, the token issued for the first is never sent there.
func TestTokenStaysWithItsServer(t *testing.T) {
	f := newFakeAS(t)
	c, _, _, srv := newGatewayServer(t, f, config.ServerOAuth{ClientID: "gw"})
	ctx := t.Context()
	cr := connectRequired(t, c.Check(ctx, "notes", "alice", ""))
	if code, _ := open(t, browser(t), cr.URL); code != 200 {
		t.Fatal("connect failed")
	}
	got := make(chan string, 8)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.WriteHeader(401)
	}))
	t.Cleanup(other.Close)
	srv.URL = other.URL + "/mcp"
	hc := &http.Client{Transport: c.Transport(*srv, "alice", nil)}
	_, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	connectRequired(t, err)
	select {
	case a := <-got:
		t.Fatalf("the other server got a request with Authorization %q", a)
	default:
	}
	if ok, _ := c.Connected(ctx, "notes", "alice"); ok {
		t.Fatal("the token of the old origin is still kept")
	}
}

// TestMetadataDocument: the gateway serves its client ID metadata document
// at an https public URL (its URL is the client_id), and none otherwise.
func TestMetadataDocument(t *testing.T) {
	for _, tt := range []struct {
		public string
		status int
	}{{"https://gw.example", 200}, {"http://127.0.0.1:8080", 404}} {
		c, err := New(Options{PublicURL: tt.public, Secret: []byte(strings.Repeat("k", 32)), Store: newMemStore(),
			Servers: func(string) (config.Server, bool) { return config.Server{}, false }})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetadataDocumentPath, nil))
		if rec.Code != tt.status {
			t.Fatalf("%s: GET %s = %d, want %d", tt.public, MetadataDocumentPath, rec.Code, tt.status)
		}
		if tt.status != 200 {
			continue
		}
		var doc struct {
			ClientID     string   `json:"client_id"`
			RedirectURIs []string `json:"redirect_uris"`
			GrantTypes   []string `json:"grant_types"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ClientID != tt.public+MetadataDocumentPath || len(doc.RedirectURIs) != 1 || doc.RedirectURIs[0] != tt.public+CallbackPath ||
			!slices.Contains(doc.GrantTypes, "refresh_token") {
			t.Errorf("document %s", rec.Body)
		}
	}
}

func TestWaitsForAccount(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"server/discover: Post http://x/mcp: " + errNoCatalogAccount.Error(), true},
		{`initialize: Post http://x/mcp: server "notes" ` + catalogRefused + ": the server no longer accepts your authorization", true},
		{"dial tcp: connection refused", false},
		{"", false},
	} {
		if got := WaitsForAccount(tt.text); got != tt.want {
			t.Errorf("WaitsForAccount(%q) = %v", tt.text, got)
		}
	}
}
