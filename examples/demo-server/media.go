package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The media tools (picture, sound, document, icon, mixed) return binary
// content blocks for mcpgw's media rewrite: blocks above its size threshold
// are replaced by links, smaller ones stay inline.
//
// Every fixture is a pure function of the constants below, so a tool returns
// the same bytes on every call and in every process built with the same Go
// toolchain, whose image/png and compress/flate do the encoding. A test that
// reaches the demo server directly gets the reference bytes by calling the
// same tool there; nothing needs to import this package.

const (
	// defaultPictureKiB is picture's size when size_kib is absent.
	defaultPictureKiB = 200
	// maxPictureKiB bounds size_kib, and so what one call may allocate.
	maxPictureKiB = 4096
	// pictureWidth makes each row of RGBA pixels 1 KiB, so a size_kib-row
	// picture holds size_kib KiB of pixels.
	pictureWidth = 256
	// The PCG seed of picture's pixels: "mcpgw" and "pictur" in ASCII.
	pictureSeed1, pictureSeed2 = 0x6d63706777, 0x706963747572

	// The sound tool's tone: one second of 440 Hz at 8 kHz, 16-bit mono.
	soundRate    = 8000
	soundHz      = 440
	soundSamples = soundRate

	// iconSize is the icon's width and height in pixels.
	iconSize = 16

	// reportURI and reportText identify the document tool's PDF.
	reportURI  = "file:///demo/report.pdf"
	reportText = "mcpgw demo report"
	// reportMinSize is the size the PDF is padded past, well above mcpgw's
	// default 4 KiB media threshold.
	reportMinSize = 8 * 1024
)

// The fixtures are built on first use, then shared read-only by every call.
var (
	picturePNG = sync.OnceValues(func() ([]byte, error) { return noisePNG(defaultPictureKiB) })
	iconPNG    = sync.OnceValues(func() ([]byte, error) { return discPNG(iconSize) })
	soundWAV   = sync.OnceValue(func() []byte { return sineWAV(soundHz, soundRate, soundSamples) })
	reportPDF  = sync.OnceValue(func() []byte { return textPDF(reportText, reportMinSize) })
)

// pictureAnnotations and soundAnnotations are on the picture and sound blocks
// so that a test can check that a gateway keeps a block's annotations when it
// rewrites the block. The icon has none.
var (
	pictureAnnotations = &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}
	soundAnnotations   = &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.25}
)

// The picture's input schema leaves both the default and the range of
// size_kib to the handler. A schema default would make go-sdk v1.8.0 panic,
// killing the server, on "arguments": null (jsonschema-go's ApplyDefaults
// writes to the nil map; compare go-sdk issue 1062); and the handler's range
// error is plainer than the SDK's "minimum: 0/1 is less than 1.000000".
var (
	pictureInputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"size_kib": {"type": "integer", "description": "The picture's height in rows of 1 KiB of pixels, and so about its size in KiB: from 1 to 4096. If absent, 200."}
	}
}`)

	mixedOutputSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"ok": {"type": "boolean", "description": "Always true."}
	},
	"required": ["ok"],
	"additionalProperties": false
}`)
)

// addMediaTools adds the media tools to s.
func addMediaTools(s *mcp.Server, t *tools) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "picture",
		Description: "Returns one image block: a 256-pixel-wide PNG of deterministic random RGBA noise, size_kib rows high (default 200), " +
			"stored uncompressed so that it is just over size_kib KiB (205,160 bytes by default). The block is annotated with audience [\"user\"] and priority 0.5. " +
			"The same size_kib always gives the same bytes, and a smaller picture's pixels are the first rows of a larger one's.",
		InputSchema: pictureInputSchema,
	}, t.picture)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "sound",
		Description: "Returns one audio block (audio/wav): one second of a 440 Hz sine as 16-bit mono PCM at 8 kHz, 16,044 bytes, annotated with audience [\"user\"] and priority 0.25. Always the same bytes.",
		InputSchema: emptyInputSchema,
	}, t.sound)
	mcp.AddTool(s, &mcp.Tool{
		Name: "document",
		Description: "Returns an embedded resource block holding a blob, file:///demo/report.pdf (application/pdf): a one-page PDF 1.4 reading \"mcpgw demo report\", " +
			"padded with a comment to just over 8 KiB; then a text block \"report attached\". Always the same bytes.",
		InputSchema: emptyInputSchema,
	}, t.document)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "icon",
		Description: "Returns one image block: a 16x16 PNG of a blue disc on a transparent background, well under 1 KiB, with no annotations. Always the same bytes.",
		InputSchema: emptyInputSchema,
	}, t.icon)
	mcp.AddTool(s, &mcp.Tool{
		Name: "mixed",
		Description: "Returns, in order, a text block \"before\", picture's default image block, a resource_link to https://example.com/doc named doc, and icon's image block, " +
			"with structured content {\"ok\": true}.",
		InputSchema:  emptyInputSchema,
		OutputSchema: mixedOutputSchema,
	}, t.mixed)
}

type pictureInput struct {
	SizeKiB *int `json:"size_kib"` // nil means defaultPictureKiB
}

// picture returns the cached default picture, or encodes one of another size
// anew on every call: the sizes are too many to keep.
func (t *tools) picture(_ context.Context, _ *mcp.CallToolRequest, in pictureInput) (*mcp.CallToolResult, any, error) {
	size := defaultPictureKiB
	if in.SizeKiB != nil {
		size = *in.SizeKiB
	}
	if size < 1 || size > maxPictureKiB {
		return nil, nil, fmt.Errorf("picture: size_kib must be from 1 to %d, got %d", maxPictureKiB, size)
	}
	get := picturePNG
	if size != defaultPictureKiB {
		get = func() ([]byte, error) { return noisePNG(size) }
	}
	block, err := pictureBlock(get)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{block}}, nil, nil
}

func (t *tools) sound(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.AudioContent{MIMEType: "audio/wav", Data: soundWAV(), Annotations: soundAnnotations},
	}}, nil, nil
}

func (t *tools) document(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: reportURI, MIMEType: "application/pdf", Blob: reportPDF()}},
		&mcp.TextContent{Text: "report attached"},
	}}, nil, nil
}

func (t *tools) icon(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	block, err := iconBlock()
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{block}}, nil, nil
}

type mixedOutput struct {
	OK bool `json:"ok"`
}

// mixed sets Content itself, so the SDK adds structuredContent without the
// usual text copy of it.
func (t *tools) mixed(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, mixedOutput, error) {
	picture, err := pictureBlock(picturePNG)
	if err != nil {
		return nil, mixedOutput{}, err
	}
	icon, err := iconBlock()
	if err != nil {
		return nil, mixedOutput{}, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "before"},
		picture,
		&mcp.ResourceLink{URI: "https://example.com/doc", Name: "doc"},
		icon,
	}}, mixedOutput{OK: true}, nil
}

func pictureBlock(get func() ([]byte, error)) (*mcp.ImageContent, error) {
	data, err := get()
	if err != nil {
		return nil, fmt.Errorf("encoding picture: %w", err)
	}
	return &mcp.ImageContent{MIMEType: "image/png", Data: data, Annotations: pictureAnnotations}, nil
}

func iconBlock() (*mcp.ImageContent, error) {
	data, err := iconPNG()
	if err != nil {
		return nil, fmt.Errorf("encoding icon: %w", err)
	}
	return &mcp.ImageContent{MIMEType: "image/png", Data: data}, nil
}

// noisePNG encodes a pictureWidth×rows NRGBA image whose pixel bytes, row by
// row, are the little-endian Uint64s of rand.NewPCG(pictureSeed1,
// pictureSeed2). Noise defeats compression anywhere downstream, and without
// compression here the size is exact: rows×(1+1024) bytes of image data plus
// a few hundred bytes of PNG and zlib framing.
func noisePNG(rows int) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, pictureWidth, rows))
	r := rand.New(rand.NewPCG(pictureSeed1, pictureSeed2))
	for i := 0; i < len(img.Pix); i += 8 {
		binary.LittleEndian.PutUint64(img.Pix[i:], r.Uint64())
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// discPNG encodes a size×size image of an opaque blue disc on transparent
// black.
func discPNG(size int) ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	c := float64(size-1) / 2
	for y := range size {
		for x := range size {
			if math.Hypot(float64(x)-c, float64(y)-c) <= c {
				img.SetNRGBA(x, y, color.NRGBA{R: 32, G: 96, B: 224, A: 255})
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sineWAV returns a RIFF/WAVE file of n samples of a sine at hz, as 16-bit
// mono PCM at rate samples per second and half of full scale.
func sineWAV(hz, rate, n int) []byte {
	const (
		channels      = 1
		bitsPerSample = 16
		blockAlign    = channels * bitsPerSample / 8
	)
	dataSize := n * blockAlign
	le := binary.LittleEndian
	b := make([]byte, 0, 44+dataSize)
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(36+dataSize)) // the rest of the file after this field
	b = append(b, "WAVE"...)
	b = append(b, "fmt "...)
	b = le.AppendUint32(b, 16) // the size of a PCM fmt chunk
	b = le.AppendUint16(b, 1)  // PCM
	b = le.AppendUint16(b, channels)
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(rate*blockAlign)) // bytes per second
	b = le.AppendUint16(b, blockAlign)
	b = le.AppendUint16(b, bitsPerSample)
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(dataSize))
	for i := range n {
		v := math.Round(math.MaxInt16 / 2 * math.Sin(2*math.Pi*float64(hz)*float64(i)/float64(rate)))
		b = le.AppendUint16(b, uint16(int16(v)))
	}
	return b
}

// textPDF returns a one-page PDF 1.4 that shows text in 24-point Helvetica.
// Comment lines after the header pad it to just over minSize bytes, and its
// cross-reference table gives every object's true offset. text must not need
// escaping in a PDF string.
func textPDF(text string, minSize int) []byte {
	stream := fmt.Sprintf("BT /F1 24 Tf 72 720 Td (%s) Tj ET", text)
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		// Length leaves out the end of line before endstream (7.3.8.1).
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	const padLine = "% padding to lift this file above mcpgw's media threshold\n"
	build := func(pad int) []byte {
		var b bytes.Buffer
		// The second line marks the file as binary (ISO 32000-1, 7.5.2).
		b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
		for range pad {
			b.WriteString(padLine)
		}
		offsets := make([]int, len(objects))
		for i, obj := range objects {
			offsets[i] = b.Len()
			fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, obj)
		}
		xref := b.Len()
		fmt.Fprintf(&b, "xref\n0 %d\n", len(objects)+1)
		b.WriteString("0000000000 65535 f \n") // each entry is exactly 20 bytes
		for _, off := range offsets {
			fmt.Fprintf(&b, "%010d 00000 n \n", off)
		}
		fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF", len(objects)+1, xref)
		return b.Bytes()
	}
	// Padding only moves offsets up, which can only lengthen the file.
	unpadded := len(build(0))
	if unpadded > minSize {
		return build(0)
	}
	return build((minSize-unpadded)/len(padLine) + 1)
}
