package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/config"
)

// MetadataPath is where the protected-resource metadata is served (RFC
// 9728, section 3): at the host's root, and also with the resource's path
// after it (MetadataPath + "/mcp"), the form MCP clients try first.
const MetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the protected-resource metadata of the gateway (RFC
// 9728, section 2): which resource it is and which authorization servers
// issue tokens for it.
type ResourceMetadata struct {
	// Resource is the resource URL, <public_url>/mcp.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers of tokens the gateway takes.
	AuthorizationServers []string `json:"authorization_servers"`
	// ScopesSupported are the scopes a token needs.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// BearerMethodsSupported is ["header"]: tokens go in Authorization,
	// never in a query or a form (MCP 2025-11-25, basic/authorization).
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// resourceMetadata is the metadata with what is derived from it.
type resourceMetadata struct {
	ResourceMetadata
	resource string   // the resource URL
	url      string   // where the metadata is: the resource's origin + MetadataPath
	paths    []string // the paths it is served on
	body     []byte   // the JSON
}

// newResourceMetadata returns the metadata of resource for j.
func newResourceMetadata(resource string, j config.JWT) (*resourceMetadata, error) {
	if resource == "" {
		return nil, errors.New("auth: jwt needs Options.Resource, the gateway's resource URL (<public_url>/mcp)")
	}
	u, err := url.Parse(resource)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("auth: resource %q is not an absolute http(s) URL without query or fragment", resource)
	}
	m := &resourceMetadata{
		ResourceMetadata: ResourceMetadata{
			Resource:               resource,
			AuthorizationServers:   slices.Clone(j.AuthorizationServers),
			ScopesSupported:        slices.Clone(j.Scopes),
			BearerMethodsSupported: []string{"header"},
		},
		resource: resource,
		url:      u.Scheme + "://" + u.Host + MetadataPath,
		paths:    []string{MetadataPath},
	}
	if len(m.AuthorizationServers) == 0 {
		m.AuthorizationServers = []string{j.Issuer}
	}
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		m.paths = append(m.paths, MetadataPath+p)
	}
	if m.body, err = json.Marshal(m.ResourceMetadata); err != nil {
		return nil, err
	}
	return m, nil
}

// Metadata returns the gateway's protected-resource metadata, and false
// when JWTs are off: then there is no authorization server to name and
// nothing to serve.
func (a *Authenticator) Metadata() (ResourceMetadata, bool) {
	if a.meta == nil {
		return ResourceMetadata{}, false
	}
	m := a.meta.ResourceMetadata
	m.AuthorizationServers = slices.Clone(m.AuthorizationServers)
	m.ScopesSupported = slices.Clone(m.ScopesSupported)
	m.BearerMethodsSupported = slices.Clone(m.BearerMethodsSupported)
	return m, true
}

// MetadataPaths returns the paths MetadataHandler serves: MetadataPath,
// and MetadataPath followed by the resource's path ("/mcp"). None when
// JWTs are off.
func (a *Authenticator) MetadataPaths() []string {
	if a.meta == nil {
		return nil
	}
	return slices.Clone(a.meta.paths)
}

// MetadataHandler serves the protected-resource metadata as JSON on GET
// and HEAD of MetadataPaths, to any origin (CORS: browser-based clients
// read it before they have a token, and it holds nothing secret), and
// answers CORS preflights with 204. Another path, or every path when JWTs
// are off, is 404; another method 405. It needs no authentication: mount
// it beside /mcp, not behind Middleware.
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.meta == nil || !slices.Contains(a.meta.paths, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				w.Write(a.meta.body)
			}
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed: GET the protected-resource metadata", http.StatusMethodNotAllowed)
		}
	})
}
