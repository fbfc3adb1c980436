package toolsearch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// catalog reads testdata/catalog.json: servers with the tools they list,
// exposed as the gateway does by default, "mcp__<server>__<tool>".
func catalog(t testing.TB) map[string][]Tool {
	t.Helper()
	data, err := os.ReadFile("testdata/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct {
		Server string            `json:"server"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &servers); err != nil {
		t.Fatal(err)
	}
	out := map[string][]Tool{}
	for _, s := range servers {
		for _, raw := range s.Tools {
			var def struct{ Name string }
			if err := json.Unmarshal(raw, &def); err != nil {
				t.Fatal(err)
			}
			out[s.Server] = append(out[s.Server], Tool{Name: exposed(s.Server, def.Name), Server: s.Server, Raw: raw})
		}
	}
	return out
}

func exposed(server, tool string) string { return "mcp__" + server + "__" + tool }

func catalogIndex(t testing.TB) *Index {
	t.Helper()
	var ix Index
	if err := ix.SetServers(catalog(t)); err != nil {
		t.Fatal(err)
	}
	return &ix
}

// bestFirst is what an agent asks for, in its own words, and the tool it
// needs. Several queries have a decoy: a tool of another server that
// shares words with the query.
var bestFirst = []struct {
	query, want string
}{
	{"read the contents of a text file", exposed("filesystem", "read_text_file")},              // decoy: github get_file_contents
	{"what will the weather be like tomorrow", exposed("weather", "get_forecast")},             // decoy: current conditions
	{"send a message to the team channel", exposed("slack", "slack_post_message")},             // decoy: channel history
	{"open a pull request for my branch", exposed("github", "create_pull_request")},            // decoy: merge_pull_request
	{"which files did I modify in my working tree", exposed("git", "git_status")},              // decoy: filesystem
	{"run a SQL query against the database", exposed("postgres", "query")},                     // decoy: explain_query
	{"schedule a meeting with Ana next Tuesday", exposed("calendar", "create_event")},          // decoy: find_free_time
	{"take a screenshot of the web page", exposed("browser", "browser_take_screenshot")},       // decoy: browser_snapshot
	{"when is everyone free for a call", exposed("calendar", "find_free_time")},                // no name overlap
	{"what columns does the users table have", exposed("postgres", "describe_table")},          // decoy: list_tables
	{"are there storm warnings in Texas", exposed("weather", "get_alerts")},                    // words only in the description
	{"go to a URL in the browser", exposed("browser", "browser_navigate")},                     // decoy: every browser tool
	{"commit my staged changes", exposed("git", "git_commit")},                                 // decoy: git_add (staging)
	{"create a new directory", exposed("filesystem", "create_directory")},                      // decoy: create_*
	{"comment on a GitHub issue", exposed("github", "add_issue_comment")},                      // decoy: create_issue
	{"react with an emoji", exposed("slack", "slack_add_reaction")},                            // words only in params
	{"search for files matching a glob", exposed("filesystem", "search_files")},                // decoy: search_repositories
	{"switch to another branch", exposed("git", "git_checkout")},                               // "switches" in the description
	{"fill in the login form fields", exposed("browser", "browser_fill_form")},                 // decoy: fields in params
	{"rename a file", exposed("filesystem", "move_file")},                                      // words only in the description
	{"show the commit history", exposed("git", "git_log")},                                     // decoy: git_commit
	{"slack user email", exposed("slack", "slack_get_user_profile")},                           // server name in the query
	{"find slow queries", exposed("postgres", "explain_query")},                                // plural in the query
	{"list open issues in a repository", exposed("github", "list_issues")},                     // decoy: create_issue
	{"run javascript on the page", exposed("browser", "browser_evaluate")},                     // title's word
	{"reply in a thread", exposed("slack", "slack_reply_to_thread")},                           // short
	{"upcoming events this week", exposed("calendar", "list_events")},                          // decoy: other events
	{"file size and permissions", exposed("filesystem", "get_file_info")},                      // description only
	{"getFileInfo", exposed("filesystem", "get_file_info")},                                    // camelCase query
	{"current temperature and humidity outside", exposed("weather", "get_current_conditions")}, // decoy: forecast
}

func TestSearch_BestFirst(t *testing.T) {
	ix := catalogIndex(t)
	for _, tt := range bestFirst {
		t.Run(tt.query, func(t *testing.T) {
			hits, err := ix.Search(tt.query, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].Name != tt.want {
				t.Errorf("Search(%q) = %v, want %s first", tt.query, hits, tt.want)
			}
		})
	}
}

// TestSearch_Stemming counts the queries of bestFirst that find their tool
// first, with and without the stemmer. It measures what stemming is
// worth; it fails only if the stemmer makes anything worse.
func TestSearch_Stemming(t *testing.T) {
	count := func() (n int) {
		ix := catalogIndex(t)
		for _, tt := range bestFirst {
			hits, err := ix.Search(tt.query, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) > 0 && hits[0].Name == tt.want {
				n++
			}
		}
		return n
	}
	with := count()
	saved := stemmer
	t.Cleanup(func() { stemmer = saved })
	stemmer = func(w string) string { return w }
	without := count()
	t.Logf("best first: %d of %d with the stemmer, %d without", with, len(bestFirst), without)
	if with < without {
		t.Errorf("the stemmer makes ranking worse: %d of %d best first with it, %d without", with, len(bestFirst), without)
	}
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Name
	}
	return out
}

func TestSearch_Visible(t *testing.T) {
	ix := catalogIndex(t)
	all, err := ix.Search("create", MaxLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 4 {
		t.Fatalf("Search(create) = %v, want at least 4 hits", names(all))
	}
	hidden := map[string]bool{all[0].Name: true, all[1].Name: true}
	var asked []string
	var mu sync.Mutex
	got, err := ix.Search("create", 2, func(name string) bool {
		mu.Lock()
		asked = append(asked, name)
		mu.Unlock()
		return !hidden[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	// The two best are hidden: the next two take their places.
	if diff := cmp.Diff(names(all[2:4]), names(got)); diff != "" {
		t.Errorf("hits with the two best hidden (-want +got):\n%s", diff)
	}
	if len(asked) != 4 {
		t.Errorf("visible was asked about %v, want the 4 best in order", asked)
	}

	none, err := ix.Search("create", 5, func(string) bool { return false })
	if err != nil || len(none) != 0 {
		t.Errorf("Search with nothing visible = %v, %v; want no hits", none, err)
	}
}

func TestSearch_Limit(t *testing.T) {
	ix := catalogIndex(t)
	tests := []struct {
		name    string
		limit   int
		want    int
		wantErr string
	}{
		{"default", 0, DefaultLimit, ""},
		{"one", 1, 1, ""},
		{"more than hits", MaxLimit, 0, ""}, // every tool with "file"
		{"negative", -1, 0, "limit -1 is out of range"},
		{"too many", MaxLimit + 1, 0, "limit 51 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, err := ix.Search("file", tt.limit, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Search(limit %d) error = %v, want %q", tt.limit, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != 0 && len(hits) != tt.want {
				t.Errorf("Search(limit %d) gave %d hits, want %d", tt.limit, len(hits), tt.want)
			}
			if tt.want == 0 && (len(hits) <= DefaultLimit || len(hits) >= MaxLimit) {
				t.Errorf("Search(limit %d) gave %d hits, want every tool about files (more than %d, fewer than %d)", tt.limit, len(hits), DefaultLimit, MaxLimit)
			}
		})
	}
}

func TestSearch_BadQuery(t *testing.T) {
	ix := catalogIndex(t)
	secret := "sk-live-0123456789"
	tests := []struct {
		name, query, wantErr string
	}{
		{"empty", "", "query is empty"},
		{"blank", " \t\n ", "query is empty"},
		{"punctuation", "?!- __ ...", "query has no words"},
		{"stop words only", "What is this?", "query has no words"},
		{"too long", secret + strings.Repeat(" file", MaxQueryBytes/5), "more than the 1024 allowed"},
		{"too many words", manyWords(MaxQueryTerms + 1), "query has 33 distinct words, more than the 32 allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, err := ix.Search(tt.query, 0, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Search error = %v (hits %v), want %q", err, hits, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error repeats the query: %v", err)
			}
		})
	}
}

// manyWords returns n distinct words that are no stop words.
func manyWords(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = "zq" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	return strings.Join(ws, " ")
}

func TestSearch_ManyWords(t *testing.T) {
	ix := catalogIndex(t)
	// Repeated words and stop words do not count against the limit.
	q := manyWords(MaxQueryTerms-1) + " file " + strings.Repeat("the file ", 50)
	if _, err := ix.Search(q, 0, nil); err != nil {
		t.Errorf("a query of %d distinct words: %v", MaxQueryTerms, err)
	}
}

func TestSearch_EqualScoresByName(t *testing.T) {
	var ix Index
	raw := json.RawMessage(`{"description":"Deletes a record."}`)
	// Identical definitions score the same wherever they sit.
	err := ix.SetServers(map[string][]Tool{
		"b": {{Name: "zeta", Server: "b", Raw: raw}, {Name: "alpha", Server: "b", Raw: raw}},
		"a": {{Name: "mid", Server: "a", Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search("delete record", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alpha", "mid", "zeta"}, names(hits)); diff != "" {
		t.Errorf("order of equal scores (-want +got):\n%s", diff)
	}
	if hits[0].Score != hits[2].Score {
		t.Errorf("scores differ: %v", hits)
	}
}

func TestSearch_EmptyIndex(t *testing.T) {
	var ix Index
	hits, err := ix.Search("read a file", 0, nil)
	if err != nil || len(hits) != 0 {
		t.Errorf("Search on an empty index = %v, %v; want no hits and no error", hits, err)
	}
	if _, err := ix.Search("", 0, nil); err == nil {
		t.Error("an empty query on an empty index gave no error")
	}
}

func TestSetServer_ReplaceAndRemove(t *testing.T) {
	ix := catalogIndex(t)
	query := "weather forecast"
	first := func() string {
		t.Helper()
		hits, err := ix.Search(query, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			return ""
		}
		return hits[0].Name
	}
	if got := first(); got != exposed("weather", "get_forecast") {
		t.Fatalf("before: first hit %q", got)
	}

	// A second weather server appears with a better match.
	err := ix.SetServer("meteo", []Tool{{
		Name: exposed("meteo", "weather_forecast"), Server: "meteo",
		Raw: json.RawMessage(`{"title":"Weather forecast","description":"Weather forecast for a city: weather by the hour."}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := first(); got != exposed("meteo", "weather_forecast") {
		t.Errorf("after adding meteo: first hit %q", got)
	}

	// The weather server restarts with its tools renamed.
	tools := catalog(t)["weather"]
	for i := range tools {
		tools[i].Name = strings.Replace(tools[i].Name, "__get_", "__fetch_", 1)
	}
	if err := ix.SetServer("weather", tools); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search("weather alerts warnings", MaxLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if strings.Contains(h.Name, "__get_") && h.Server == "weather" {
			t.Errorf("a replaced tool is still found: %s", h.Name)
		}
	}
	if len(hits) == 0 || hits[0].Name != exposed("weather", "fetch_alerts") {
		t.Errorf("after the rename: %v, want %s first", names(hits), exposed("weather", "fetch_alerts"))
	}

	// Both weather servers go away.
	before := ix.Len()
	ix.RemoveServer("meteo")
	if err := ix.SetServer("weather", nil); err != nil {
		t.Fatal(err)
	}
	ix.RemoveServer("no-such-server")
	if got, want := ix.Len(), before-1-len(tools); got != want {
		t.Errorf("Len after removing = %d, want %d", got, want)
	}
	hits, err = ix.Search("weather forecast temperature wind alerts", MaxLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Server == "weather" || h.Server == "meteo" {
			t.Errorf("a removed server's tool is still found: %v", h)
		}
	}
}

func TestSetServers_Errors(t *testing.T) {
	ok := json.RawMessage(`{"description":"fine"}`)
	tests := []struct {
		name    string
		in      map[string][]Tool
		wantErr string
	}{
		{"empty server", map[string][]Tool{"": {{Name: "x", Raw: ok}}}, "a server name is empty"},
		{"no name", map[string][]Tool{"s": {{Server: "s", Raw: ok}}}, `a tool of server "s" has no name`},
		{"other server", map[string][]Tool{"s": {{Name: "x", Server: "t", Raw: ok}}}, `tool "x" is listed for server "s" but names server "t"`},
		{"twice", map[string][]Tool{"s": {{Name: "x", Server: "s", Raw: ok}, {Name: "x", Server: "s", Raw: ok}}}, `tool "x" of server "s" is listed twice`},
		{"not JSON", map[string][]Tool{"s": {{Name: "x", Server: "s", Raw: json.RawMessage(`{"a":`)}}}, `tool "x" of server "s": its definition is not valid JSON`},
		{"no definition", map[string][]Tool{"s": {{Name: "x", Server: "s"}}}, `tool "x" of server "s": its definition is not valid JSON`},
		{"array", map[string][]Tool{"s": {{Name: "x", Server: "s", Raw: json.RawMessage(`[1]`)}}}, `tool "x" of server "s": its definition is not a JSON object`},
		{"null", map[string][]Tool{"s": {{Name: "x", Server: "s", Raw: json.RawMessage(`null`)}}}, `not a JSON object`},
		{"name taken", map[string][]Tool{"t": {{Name: exposed("git", "git_log"), Server: "t", Raw: ok}}}, `tool "mcp__git__git_log" of server "t": server "git" has a tool of that name`},
		{"one bad of two", map[string][]Tool{
			"a": {{Name: "fine", Server: "a", Raw: ok}},
			"b": {{Name: "bad", Server: "b", Raw: json.RawMessage(`1`)}},
		}, `tool "bad" of server "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := catalogIndex(t)
			before := ix.Len()
			err := ix.SetServers(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("SetServers error = %v, want %q", err, tt.wantErr)
			}
			// Nothing was applied.
			if ix.Len() != before {
				t.Errorf("Len = %d after a failed update, want %d", ix.Len(), before)
			}
			hits, err := ix.Search("fine", 0, nil)
			if err != nil || len(hits) != 0 {
				t.Errorf("after a failed update, Search(fine) = %v, %v", hits, err)
			}
		})
	}
}

// TestSetServers_Rename moves a name from one server to another in one
// step, as a name collision appearing does.
func TestSetServers_Rename(t *testing.T) {
	var ix Index
	raw := json.RawMessage(`{"description":"Search the web."}`)
	if err := ix.SetServer("a", []Tool{{Name: "search", Server: "a", Raw: raw}}); err != nil {
		t.Fatal(err)
	}
	err := ix.SetServers(map[string][]Tool{
		"a": {{Name: "mcp__a__search", Server: "a", Raw: raw}},
		"b": {{Name: "search", Server: "b", Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search("search web", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range hits {
		got[h.Name] = h.Server
	}
	if diff := cmp.Diff(map[string]string{"mcp__a__search": "a", "search": "b"}, got); diff != "" {
		t.Errorf("hits after the rename (-want +got):\n%s", diff)
	}
}

// TestIndex_Fields checks what each part of a definition contributes,
// and that unexpected shapes are skipped, not fatal.
func TestIndex_Fields(t *testing.T) {
	tests := []struct {
		name, raw, query string
		found            bool
	}{
		{"title", `{"title":"Quarterly revenue"}`, "revenue", true},
		{"annotations title", `{"annotations":{"title":"Quarterly revenue"}}`, "revenue", true},
		{"description", `{"description":"Quarterly revenue"}`, "revenue", true},
		{"parameter name", `{"inputSchema":{"type":"object","properties":{"revenueCents":{"type":"integer"}}}}`, "revenue", true},
		{"parameter description", `{"inputSchema":{"properties":{"q":{"description":"Quarterly revenue"}}}}`, "revenue", true},
		{"parameter title", `{"inputSchema":{"properties":{"q":{"title":"Quarterly revenue"}}}}`, "revenue", true},
		{"nested parameter", `{"inputSchema":{"properties":{"q":{"type":"object","properties":{"revenue":{"type":"number"}}}}}}`, "revenue", true},
		{"array of objects", `{"inputSchema":{"properties":{"q":{"type":"array","items":{"properties":{"x":{"description":"revenue"}}}}}}}`, "revenue", true},
		{"two levels down", `{"inputSchema":{"properties":{"q":{"properties":{"r":{"properties":{"revenue":{}}}}}}}}`, "revenue", false},
		{"output schema", `{"outputSchema":{"properties":{"revenue":{}}}}`, "revenue", false},
		{"server name", `{}`, "finance", true},
		{"exposed name", `{}`, "report", true},
		{"description not a string", `{"description":{"revenue":1},"title":"Revenue"}`, "revenue", true},
		{"boolean schemas", `{"inputSchema":{"properties":{"revenue":true,"x":false}}}`, "revenue", true},
		{"properties not an object", `{"inputSchema":{"properties":["revenue"]}}`, "revenue", false},
		{"schema not an object", `{"inputSchema":"revenue"}`, "revenue", false},
		{"escaped", `{"description":"Quarterly rev\u0065nue"}`, "revenue", true},
		{"upstream name is not indexed", `{"name":"revenue"}`, "revenue", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ix Index
			raw := json.RawMessage(tt.raw)
			err := ix.SetServer("finance", []Tool{{Name: "mcp__finance__report", Server: "finance", Raw: raw}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.raw != string(raw) {
				t.Errorf("Raw changed to %s", raw)
			}
			hits, err := ix.Search(tt.query, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if found := len(hits) == 1; found != tt.found {
				t.Errorf("Search(%q) = %v, want found %v", tt.query, hits, tt.found)
			}
		})
	}
}

func TestTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"mcp__github__create_pull_request", []string{"mcp", "github", "create", "pull", "request"}},
		{"getUserID", []string{"get", "user", "id", "getuserid"}},
		{"HTTPServer", []string{"http", "server", "httpserver"}},
		{"listURLs", []string{"list", "url", "listurl"}},
		{"JavaScript", []string{"java", "script", "javascript"}},
		{"utf8Decode s3-bucket base64", []string{"utf8", "decode", "utf8decode", "s3", "bucket", "base64"}},
		{"Read the file's contents, please!", []string{"read", "file", "content"}},
		{"repositories branches processes status analysis", []string{"repository", "branch", "process", "status", "analysis"}},
		{"Größe der Dateien", []string{"größe", "der", "dateien"}},
		{"a x 7 " + strings.Repeat("z", maxTermBytes+1), []string{"7"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, appendTerms(nil, tt.in)); diff != "" {
				t.Errorf("appendTerms(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestTerms_Bounded(t *testing.T) {
	long := strings.Repeat("revenue ", 3*maxFieldTerms)
	if n := len(appendTerms(nil, long)); n != maxFieldTerms {
		t.Errorf("%d terms from one field, want at most %d", n, maxFieldTerms)
	}
}

// TestSearch_UpdateDuringSearch: a search that is under way when a server
// is removed finishes on the snapshot it began with, and takes no lock
// that the update needs (visible is called during the search).
func TestSearch_UpdateDuringSearch(t *testing.T) {
	ix := catalogIndex(t)
	var churn []Tool
	for i := range 10 {
		churn = append(churn, Tool{Name: fmt.Sprintf("mcp__churn__tool%d", i), Server: "churn", Raw: json.RawMessage(`{"description":"Churning tool."}`)})
	}
	if err := ix.SetServer("churn", churn); err != nil {
		t.Fatal(err)
	}
	removed := false
	hits, err := ix.Search("churning tool", MaxLimit, func(string) bool {
		if !removed {
			removed = true
			ix.RemoveServer("churn")
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 10 {
		t.Errorf("the search under way found %d of the 10 tools: %v", len(hits), names(hits))
	}
	after, err := ix.Search("churning tool", MaxLimit, nil)
	if err != nil || len(after) != 0 {
		t.Errorf("after the removal: %v, %v; want no hits", names(after), err)
	}
}

// TestIndex_Concurrent searches while servers come, change and go. Run
// with -race. Every search must see a whole snapshot: a server's tools
// all there or all gone, never half.
func TestIndex_Concurrent(t *testing.T) {
	ix := catalogIndex(t)
	version := func(v int) []Tool {
		tools := make([]Tool, 10)
		for i := range tools {
			tools[i] = Tool{
				Name: fmt.Sprintf("mcp__churn__tool%d", i), Server: "churn",
				Raw: json.RawMessage(fmt.Sprintf(`{"description":"Churning tool, version %d."}`, v)),
			}
		}
		return tools
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range 200 {
			if v%3 == 2 {
				ix.RemoveServer("churn")
				continue
			}
			if err := ix.SetServer("churn", version(v)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errs := make(chan string, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				hits, err := ix.Search("churning tool", MaxLimit, nil)
				if err != nil {
					errs <- err.Error()
					return
				}
				n := 0
				for _, h := range hits {
					if h.Server == "churn" {
						n++
					}
				}
				if n != 0 && n != 10 {
					errs <- fmt.Sprintf("a search saw %d of the churning server's 10 tools", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func FuzzSearch(f *testing.F) {
	for _, tt := range bestFirst {
		f.Add(tt.query, 3)
	}
	f.Add("", 0)
	f.Add("   ", 5)
	f.Add("\xff\xfe file", 1)
	f.Add("ÀÉÎ getHTTPUrl__x--y", 50)
	f.Add(strings.Repeat("a", MaxQueryBytes+1), 5)
	f.Add("file", -3)
	ix := catalogIndex(f)
	all := ix.Len()
	f.Fuzz(func(t *testing.T, query string, limit int) {
		hits, err := ix.Search(query, limit, nil)
		if err != nil {
			if hits != nil {
				t.Errorf("hits %v with error %v", hits, err)
			}
			if len(query) > 8 && strings.Contains(err.Error(), query) {
				t.Errorf("error repeats the query: %v", err)
			}
			return
		}
		if strings.TrimSpace(query) == "" || len(query) > MaxQueryBytes {
			t.Errorf("query %q of %d bytes accepted", query, len(query))
		}
		want := limit
		if want == 0 {
			want = DefaultLimit
		}
		if len(hits) > want || len(hits) > all {
			t.Errorf("%d hits for limit %d", len(hits), limit)
		}
		seen := map[string]bool{}
		for i, h := range hits {
			if seen[h.Name] {
				t.Errorf("%s found twice", h.Name)
			}
			seen[h.Name] = true
			if !(h.Score > 0) || h.Score != h.Score {
				t.Errorf("hit %v has score %v", h, h.Score)
			}
			if i > 0 {
				p := hits[i-1]
				if p.Score < h.Score || (p.Score == h.Score && p.Name > h.Name) {
					t.Errorf("hits out of order: %v before %v", p, h)
				}
			}
		}
		// Hiding every other hit leaves the rest in the same order.
		odd := map[string]bool{}
		for i, h := range hits {
			if i%2 == 1 {
				odd[h.Name] = true
			}
		}
		some, err := ix.Search(query, limit, func(name string) bool { return !odd[name] })
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range some {
			if odd[h.Name] {
				t.Errorf("hidden %s returned", h.Name)
			}
		}
		var kept []string
		for _, h := range hits {
			if !odd[h.Name] {
				kept = append(kept, h.Name)
			}
		}
		if got := names(some); len(got) < len(kept) || !slices.Equal(kept, got[:len(kept)]) {
			t.Errorf("with every other hit hidden: %v, want %v first", got, kept)
		}
	})
}

// TestSearch_Stuffing: a hostile upstream whose tool repeats the words
// agents search for, in any field, does not push the tools that are about
// them out of first place. (One that lists every word of a dictionary
// can: that is the nature of ranking by words; see the package doc.)
func TestSearch_Stuffing(t *testing.T) {
	words := "weather forecast file message channel query branch table event page issue commit"
	rep := strings.Repeat(words+" ", 100)
	tests := []struct{ name, raw string }{
		{"description", `{"description":"` + rep + `"}`},
		{"title", `{"title":"` + rep + `"}`},
		{"parameter", `{"inputSchema":{"properties":{"q":{"description":"` + rep + `"}}}}`},
		{"every field", `{"title":"` + rep + `","description":"` + rep + `","inputSchema":{"properties":{"q":{"description":"` + rep + `"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := catalogIndex(t)
			evil := []Tool{{Name: "mcp__evil__helper", Server: "evil", Raw: json.RawMessage(tt.raw)}}
			if err := ix.SetServer("evil", evil); err != nil {
				t.Fatal(err)
			}
			for _, q := range bestFirst {
				hits, err := ix.Search(q.query, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) == 0 || hits[0].Name != q.want {
					t.Errorf("Search(%q) = %v, want %s first", q.query, hits, q.want)
				}
			}
		})
	}
}

// FuzzSetServer feeds tool definitions an upstream could send: the index
// takes any JSON object, refuses anything else with an error, never
// changes Raw, and a tool it took is found by its name's words.
func FuzzSetServer(f *testing.F) {
	for _, tools := range catalog(f) {
		for _, t := range tools {
			f.Add("tool_name", []byte(t.Raw))
		}
	}
	f.Add("getHTTPUrl", []byte(`{"inputSchema":{"properties":{"a":{"items":{"properties":{"b":true}}}}}}`))
	f.Add("x", []byte(`{"title":"\ud800","description":"\u00e9t\u00e9"}`))
	f.Add("y", []byte(`{"inputSchema":{"properties":{"\"q\"":{"description":5}}},"annotations":[]}`))
	f.Add("z", []byte(` {} `))
	f.Add("w", []byte(`[]`))
	f.Add("v", []byte(`{"a":`))
	f.Fuzz(func(t *testing.T, name string, raw []byte) {
		orig := slices.Clone(raw)
		var ix Index
		err := ix.SetServer("fuzz", []Tool{{Name: name, Server: "fuzz", Raw: raw}})
		if !bytes.Equal(orig, raw) {
			t.Fatalf("Raw changed from %q to %q", orig, raw)
		}
		object := json.Valid(raw) && bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("{"))
		if (err == nil) != (object && name != "") {
			t.Fatalf("SetServer(%q, %q) error = %v", name, raw, err)
		}
		if err != nil {
			if ix.Len() != 0 {
				t.Errorf("Len = %d after an error", ix.Len())
			}
			return
		}
		terms := appendTerms(nil, name)
		if len(terms) == 0 || len(terms) > MaxQueryTerms || len(name) > MaxQueryBytes {
			return
		}
		hits, err := ix.Search(name, 1, nil)
		if err != nil {
			t.Fatalf("Search(%q): %v", name, err)
		}
		if len(hits) != 1 || hits[0].Name != name || hits[0].Server != "fuzz" {
			t.Errorf("Search(%q) = %v, want the tool", name, hits)
		}
	})
}
