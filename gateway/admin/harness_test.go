package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/openapi"
	"github.com/mcpgw/mcpgw/store"
)

// Every request a test sends goes through send, which checks it and the
// API's answer against the OpenAPI document (openapi.Admin):
//
//	request ──► FindRoute ──► ValidateRequest ──► echo (the API) ──► ValidateResponse
//	           (unknown: fail)  (rejected and yet               (status, headers and body
//	                             answered 2xx: fail)              against the document)
//
// The API may be stricter than the document (a url it cannot parse, an
// environment variable outside the prefix: 400), never looser.

// token is the admin token of the tests' API.
const token = "admin-secret-token"

func hashOf(token string) string {
	s := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(s[:])
}

// spec is the document and a router over it, loaded and validated once.
var spec = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Admin())
	if err != nil {
		return nil, err
	}
	if doc.OpenAPIMajorMinor() != "3.1" {
		return nil, errors.New("the document is not OpenAPI 3.1")
	}
	if err := doc.Validate(loader.Context, openapi3.EnableMultiError()); err != nil {
		return nil, err
	}
	return doc, nil
})

var router = sync.OnceValues(func() (routers.Router, error) {
	doc, err := spec()
	if err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(doc)
})

// validation is how requests and responses are checked: every problem
// reported, and an undocumented status is an error rather than falling
// back on a default response. The tests send real tokens, but the
// document's security is the API's to enforce.
func validation() *openapi3filter.Options {
	return &openapi3filter.Options{
		MultiError:            true,
		IncludeResponseStatus: true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
}

// env is an API over a gateway core that runs on a fake manager, with a
// store that can fail.
type env struct {
	api   *API
	e     *echo.Echo
	core  *gateway.Server
	m     *fakeManager
	store *faultyStore
	log   *syncBuffer
	// fromConfig are the config file's servers.
	fromConfig []string
}

// envOptions vary the API of an env.
type envOptions struct {
	off      bool                   // no admin.tokens
	stdio    []string               // admin.stdio_commands, as plain commands
	patterns []config.StdioCommand  // admin.stdio_commands after those of stdio
	env      []string               // admin.stdio_env
	cwd      []string               // admin.stdio_cwd
	replicas func() []store.Replica // the cluster's, if not nil
	accounts Accounts               // the OAuth client's, if not nil
}

// stdioCommands are the admin.stdio_commands of o.
func stdioCommands(o envOptions) []config.StdioCommand {
	var out []config.StdioCommand
	for _, c := range o.stdio {
		out = append(out, config.StdioCommand{Command: c})
	}
	return append(out, o.patterns...)
}

// lookupEnv is the gateway's environment in the tests.
func lookupEnv(name string) (string, bool) {
	v, ok := map[string]string{
		"HOME":              "/root",
		"MCPGW_UPSTREAM_X":  "x-upstream-secret",
		"MCPGW_UPSTREAM_EM": "",
	}[name]
	return v, ok
}

// The servers every env starts with: "files" and "git" of the config
// file (git disabled there), and "weather", registered through the API.
const weatherEntry = `{"name":"weather","transport":"http","url":"https://weather.example/mcp","headers":{"X-Key":"${MCPGW_UPSTREAM_X}"}}`

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	off := false
	files := config.DefaultServer()
	files.Name, files.Transport, files.Command = "files", config.TransportStdio, "mcp-files"
	git := config.DefaultServer()
	git.Name, git.Transport, git.Command, git.Enabled = "git", config.TransportStdio, "mcp-git", &off
	m := newFakeManager(t, files, git)
	core, err := gateway.New(gateway.Options{Upstreams: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	ev := &env{core: core, m: m, store: newFaultyStore(), log: &syncBuffer{}, fromConfig: []string{"files", "git"}}
	opts := Options{
		Core:          core,
		Servers:       m,
		Store:         ev.store,
		ConfigServers: ev.fromConfig,
		Tokens:        []string{hashOf("another-token"), hashOf(token)},
		StdioCommands: stdioCommands(o),
		StdioEnv:      o.env,
		StdioCwd:      o.cwd,
		LookupEnv:     lookupEnv,
		Logger:        slog.New(slog.NewTextHandler(ev.log, nil)),
		Replicas:      o.replicas,
		Accounts:      o.accounts,
	}
	if o.off {
		opts.Tokens = nil
	}
	if ev.api, err = New(opts); err != nil {
		t.Fatal(err)
	}
	ev.e = echo.New()
	ev.api.Register(ev.e)
	if !o.off {
		if status, body := ev.do(t, http.MethodPost, "/admin/servers", weatherEntry, token); status != http.StatusCreated {
			t.Fatalf("registering weather: %d %s", status, body)
		}
		m.recorded()
	}
	return ev
}

// do sends a request with a JSON body (none if body is ""), and the token
// unless it is "", and returns the API's answer, checked against the
// document.
func (ev *env) do(t *testing.T, method, path, body, token string) (status int, respBody []byte) {
	t.Helper()
	rec := ev.send(t, newRequest(method, path, body, token))
	return rec.Code, rec.Body.Bytes()
}

func newRequest(method, path, body, token string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// send serves req and checks it and the answer against the document. It
// reports with t.Errorf only, so that goroutines may use it.
func (ev *env) send(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			t.Errorf("reading the request body: %v", err)
		}
	}
	what := req.Method + " " + req.URL.RequestURI()

	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	var route *routers.Route
	var params map[string]string
	rt, err := router()
	if err == nil {
		route, params, err = rt.FindRoute(vreq)
	}
	if err != nil {
		t.Errorf("%s is not in the OpenAPI document: %v", what, err)
	}
	var in *openapi3filter.RequestValidationInput
	var reqErr error
	if route != nil {
		in = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: validation()}
		reqErr = openapi3filter.ValidateRequest(context.Background(), in)
	}

	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	ev.e.ServeHTTP(rec, req)

	if reqErr != nil && rec.Code < 400 {
		t.Errorf("%s: the API answered %d, but the document rejects the request: %v", what, rec.Code, reqErr)
	}
	if in != nil {
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in,
			Status:                 rec.Code,
			Header:                 rec.Header(),
			Options:                validation(),
		}
		out.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s: the answer %d %s does not match the document: %v", what, rec.Code, rec.Body, err)
		}
	}
	if rec.Code >= 400 {
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Message == "" {
			t.Errorf("%s: the answer %d %q is not an Error with a message", what, rec.Code, rec.Body)
		}
	}
	for _, secret := range []string{token, "x-upstream-secret", errSecret.Error()} {
		if strings.Contains(rec.Body.String(), secret) {
			t.Errorf("%s: the answer holds a secret: %s", what, rec.Body)
		}
	}
	if strings.Contains(ev.log.String(), token) {
		t.Errorf("%s: the log holds the token", what)
	}
	return rec
}

// agree checks that the store and the manager agree: every server
// registered through the API is in both, with the definition the store
// keeps (and its enabled switch), every switch of a config server is the
// manager's, and the store keeps nothing else.
func (ev *env) agree(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	recs, err := ev.store.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]store.Server{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	for _, name := range ev.m.configNames() {
		sc, _ := ev.m.ServerConfig(name)
		rec, stored := byName[name]
		delete(byName, name)
		if slices.Contains(ev.fromConfig, name) {
			if stored && (rec.Source != store.ServerSourceConfig || rec.Entry != nil || rec.Enabled == nil || *rec.Enabled != sc.IsEnabled()) {
				t.Errorf("config server %s: the manager has enabled=%t, the store %+v", name, sc.IsEnabled(), rec)
			}
			continue
		}
		if !stored {
			t.Errorf("server %s runs but is not stored", name)
			continue
		}
		if rec.Source != store.ServerSourceAPI {
			t.Errorf("server %s: stored with source %q, want api", name, rec.Source)
		}
		want, ps := config.ParseServer(rec.Entry, config.Naming{}, lookupEnv)
		if len(ps) > 0 {
			t.Errorf("server %s: the stored entry %s is invalid: %v", name, rec.Entry, ps)
		}
		if rec.Enabled != nil {
			want.Enabled = rec.Enabled
		}
		if diff := cmp.Diff(want, sc); diff != "" {
			t.Errorf("server %s: the manager runs another definition than the store keeps (-stored +running):\n%s", name, diff)
		}
	}
	for _, rec := range byName {
		t.Errorf("the store keeps %+v, which the manager does not run", rec)
	}
	// The core reports what the manager runs.
	var names []string
	for _, st := range ev.core.Servers() {
		names = append(names, st.Name)
	}
	if diff := cmp.Diff(ev.m.configNames(), names); diff != "" {
		t.Errorf("the core's servers differ from the manager's (-manager +core):\n%s", diff)
	}
}
