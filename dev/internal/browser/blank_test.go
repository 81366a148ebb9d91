package browser

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

func encode(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCheckNotBlank: a one-colour image and one with a few stray pixels
// are blank; one with a block of shaded "text" is not; garbage is no image.
func TestCheckNotBlank(t *testing.T) {
	white := image.NewRGBA(image.Rect(0, 0, 400, 300))
	for i := range white.Pix {
		white.Pix[i] = 0xff
	}
	if err := CheckNotBlank(encode(t, white)); err == nil {
		t.Error("a white image passed")
	}
	stray := image.NewRGBA(white.Rect)
	copy(stray.Pix, white.Pix)
	for i := range 40 {
		stray.Set(i, 0, color.RGBA{uint8(i * 6), 0, 0, 255})
	}
	if err := CheckNotBlank(encode(t, stray)); err == nil {
		t.Error("a white image with 40 stray pixels passed")
	}
	drawn := image.NewRGBA(white.Rect)
	copy(drawn.Pix, white.Pix)
	for y := 20; y < 80; y++ {
		for x := 20; x < 300; x++ {
			v := uint8((x*7 + y*3) % 200)
			drawn.Set(x, y, color.RGBA{v, v, v, 255})
		}
	}
	if err := CheckNotBlank(encode(t, drawn)); err != nil {
		t.Errorf("a drawn image: %v", err)
	}
	if err := CheckNotBlank([]byte("not a png")); err == nil {
		t.Error("garbage passed")
	}
}
