package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"math"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersions are the MCP versions the demo server negotiates, newest
// first: the initialize-handshake ("legacy") era that mcpgw speaks to its
// upstreams. 2026-07-28 (server/discover) and 2024-11-05 are left out on
// purpose; see ServerOptions.SupportedProtocolVersions for how the SDK answers
// a client that asks for one of them.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// The tool schemas are written out as JSON, not inferred from Go types, so that
// what tools/list sends is exactly what is written here, in this key order.
// A gateway in front must relay them unchanged; the weather output schema uses
// $defs, $ref and additionalProperties to make a lossy relay visible.
var (
	echoInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"text": {"type": "string", "description": "The text to send back."}
	},
	"required": ["text"]
}`)

	addInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"a": {"type": "number", "description": "The first addend."},
		"b": {"type": "number", "description": "The second addend."}
	},
	"required": ["a", "b"]
}`)

	addOutputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"sum": {"type": "number", "description": "a + b."}
	},
	"required": ["sum"],
	"additionalProperties": false
}`)

	weatherInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"city": {"type": "string", "minLength": 1, "description": "The city to report on, e.g. \"Lisbon\"."}
	},
	"required": ["city"]
}`)

	weatherOutputSchema = json.RawMessage(`{
	"type": "object",
	"$defs": {
		"temperature": {
			"type": "object",
			"properties": {
				"value": {"type": "number", "description": "Degrees in unit."},
				"unit": {"type": "string", "enum": ["celsius"], "description": "Always celsius."}
			},
			"required": ["value", "unit"],
			"additionalProperties": false
		}
	},
	"properties": {
		"city": {"type": "string", "description": "The city asked about, as given."},
		"conditions": {"type": "string", "enum": ["sunny", "cloudy", "rain", "snow", "fog"], "description": "The sky."},
		"temperature": {"$ref": "#/$defs/temperature"},
		"humidity_pct": {"type": "integer", "minimum": 0, "maximum": 100, "description": "Relative humidity in percent."},
		"wind_kph": {"type": "number", "minimum": 0, "description": "Wind speed in km/h."}
	},
	"required": ["city", "conditions", "temperature", "humidity_pct", "wind_kph"],
	"additionalProperties": false
}`)

	emptyInputSchema = json.RawMessage(`{"type": "object", "properties": {}}`)

	slowInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"seconds": {"type": "number", "minimum": 0, "maximum": 300, "description": "How long to sleep, in seconds (default 5, at most 300). Progress is reported once a second when the request has a progress token."}
	}
}`)

	envInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1, "description": "The name of the environment variable to look up."}
	},
	"required": ["name"]
}`)
)

// options configure newServer.
type options struct {
	// Name is the server's Implementation name. If empty, "demo" is used.
	Name string
	// Stderr receives the server's diagnostic lines, such as
	// "slow: cancelled after N steps". If nil, they are discarded.
	Stderr io.Writer
	// LookupEnv is what the env tool consults. If nil, os.LookupEnv is used.
	LookupEnv func(string) (string, bool)
	// Step is how long one of slow's seconds lasts. If zero, time.Second is
	// used. Only in-process tests shorten it.
	Step time.Duration
}

// newServer returns the demo MCP server with all of its tools, pinned to
// protocolVersions. It has no resources and no prompts.
func newServer(opts options) (*mcp.Server, error) {
	if opts.Name == "" {
		opts.Name = "demo"
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Step == 0 {
		opts.Step = time.Second
	}
	if opts.Step < 0 {
		return nil, fmt.Errorf("negative step %v", opts.Step)
	}
	img, err := gradientPNG(16)
	if err != nil {
		return nil, fmt.Errorf("encoding image: %w", err)
	}
	t := &tools{
		log:       log.New(opts.Stderr, "", 0),
		lookupEnv: opts.LookupEnv,
		step:      opts.Step,
		png:       img,
	}

	s := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "v0.1.0"}, &mcp.ServerOptions{
		SupportedProtocolVersions: protocolVersions,
		// No logging capability: the server never sends notifications/message.
		Capabilities: &mcp.ServerCapabilities{},
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Returns the given text unchanged, as one text block.",
		InputSchema: echoInputSchema,
	}, t.echo)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "add",
		Description:  "Adds two numbers. Returns structured content {\"sum\": a+b} and the same JSON as text.",
		InputSchema:  addInputSchema,
		OutputSchema: addOutputSchema,
	}, t.add)
	mcp.AddTool(s, &mcp.Tool{
		Name:         "weather",
		Description:  "Returns a fake but deterministic weather report for a city, as structured content. The same city always gives the same report.",
		InputSchema:  weatherInputSchema,
		OutputSchema: weatherOutputSchema,
	}, t.weather)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "image",
		Description: "Returns a 16x16 PNG colour gradient as an image block, followed by a text block describing it.",
		InputSchema: emptyInputSchema,
	}, t.image)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "slow",
		Description: "Sleeps for the given number of seconds in one-second steps, sending notifications/progress after each step if the request has a progress token. Stops as soon as the request is cancelled.",
		InputSchema: slowInputSchema,
	}, t.slow)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "env",
		Description: "Reports whether an environment variable is set in this server's process: returns \"set\" or \"unset\". It never reveals the value.",
		InputSchema: envInputSchema,
	}, t.env)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "fail",
		Description: "Always fails: returns a tool error (isError: true) with a text message, not a JSON-RPC error.",
		InputSchema: emptyInputSchema,
	}, t.fail)
	addMediaTools(s, t)
	return s, nil
}

// tools holds what the tool handlers share. Each handler is a
// mcp.ToolHandlerFor and can be called directly, without a session.
type tools struct {
	log       *log.Logger // safe for concurrent use
	lookupEnv func(string) (string, bool)
	step      time.Duration
	png       []byte // immutable
}

type echoInput struct {
	Text string `json:"text"`
}

func (t *tools) echo(_ context.Context, _ *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
	return textResult(in.Text), nil, nil
}

type addInput struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOutput struct {
	Sum float64 `json:"sum"`
}

// add returns only the typed output: the SDK puts it in structuredContent and,
// since Content is empty, the same JSON in a text block.
func (t *tools) add(_ context.Context, _ *mcp.CallToolRequest, in addInput) (*mcp.CallToolResult, addOutput, error) {
	return nil, addOutput{Sum: in.A + in.B}, nil
}

type weatherInput struct {
	City string `json:"city"`
}

type weatherReport struct {
	City        string      `json:"city"`
	Conditions  string      `json:"conditions"`
	Temperature temperature `json:"temperature"`
	HumidityPct int         `json:"humidity_pct"`
	WindKPH     int         `json:"wind_kph"`
}

type temperature struct {
	Value int    `json:"value"`
	Unit  string `json:"unit"`
}

var conditions = []string{"sunny", "cloudy", "rain", "snow", "fog"}

// weather derives every field from a hash of the city, so reports are stable
// across runs, processes and machines.
func (t *tools) weather(_ context.Context, _ *mcp.CallToolRequest, in weatherInput) (*mcp.CallToolResult, weatherReport, error) {
	h := fnv.New32a()
	h.Write([]byte(in.City))
	sum := h.Sum32()
	return nil, weatherReport{
		City:        in.City,
		Conditions:  conditions[sum%uint32(len(conditions))],
		Temperature: temperature{Value: int((sum>>8)%45) - 10, Unit: "celsius"},
		HumidityPct: int((sum >> 16) % 101),
		WindKPH:     int((sum >> 24) % 60),
	}, nil
}

func (t *tools) image(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{MIMEType: "image/png", Data: t.png}, // the SDK base64-encodes Data
		&mcp.TextContent{Text: fmt.Sprintf("a 16x16 PNG colour gradient, %d bytes", len(t.png))},
	}}, nil, nil
}

type slowInput struct {
	// Seconds defaults to 5 here, not in the input schema: the SDK's
	// ApplyDefaults panics on "arguments": null (go-sdk v1.8.0).
	Seconds *float64 `json:"seconds"`
}

// slow sleeps for in.Seconds (default 5) in steps of one second (the last may be shorter),
// reporting progress after each step. It returns as soon as ctx is done, which
// is how the SDK delivers notifications/cancelled for the request.
func (t *tools) slow(ctx context.Context, req *mcp.CallToolRequest, in slowInput) (*mcp.CallToolResult, any, error) {
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	seconds := 5.0
	if in.Seconds != nil {
		seconds = *in.Seconds
	}
	total := math.Ceil(seconds)
	remaining := time.Duration(seconds * float64(t.step))
	for done := 0; remaining > 0; done++ {
		d := min(t.step, remaining)
		select {
		case <-ctx.Done():
			t.log.Printf("slow: cancelled after %d steps", done)
			return nil, nil, fmt.Errorf("slow: cancelled after %d steps: %w", done, ctx.Err())
		case <-time.After(d):
		}
		remaining -= d
		if token != nil && req.Session != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(done + 1),
				Total:         total,
				Message:       fmt.Sprintf("step %d of %g", done+1, total),
			})
			if err != nil && ctx.Err() == nil {
				return nil, nil, fmt.Errorf("sending progress: %w", err)
			}
		}
	}
	return textResult(fmt.Sprintf("slept %g seconds", seconds)), nil, nil
}

type envInput struct {
	Name string `json:"name"`
}

// env reports only whether the variable is present (even if empty), so that
// tests can check which variables a gateway passes to its stdio children
// without the demo server ever echoing a secret.
func (t *tools) env(_ context.Context, _ *mcp.CallToolRequest, in envInput) (*mcp.CallToolResult, any, error) {
	if _, ok := t.lookupEnv(in.Name); ok {
		return textResult("set"), nil, nil
	}
	return textResult("unset"), nil, nil
}

// errFail is what the fail tool returns. The SDK turns an error from a typed
// handler into a result with isError set and the message as text.
var errFail = errors.New("fail: this tool always fails")

func (t *tools) fail(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return nil, nil, errFail
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// gradientPNG encodes a size×size image that runs from black to red along x
// and to green along y, with constant blue.
func gradientPNG(size int) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for y := range size {
		for x := range size {
			img.SetNRGBA(x, y, color.NRGBA{
				R: uint8(x * 255 / (size - 1)),
				G: uint8(y * 255 / (size - 1)),
				B: 128,
				A: 255,
			})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
