package browser

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/png" // screenshots are PNG
)

// A screenshot is blank when a page drew (next to) nothing: one colour
// wall to wall, or a handful of pixels off it (a cursor, a border). A
// rendered page of text has thousands of pixels off the background and
// many shades (anti-aliasing).
const (
	minDrawnFraction = 0.002 // of the pixels, off the background colour
	minColours       = 16
)

// CheckNotBlank decodes a PNG screenshot and says why it is blank, or nil.
func CheckNotBlank(png []byte) error {
	img, _, err := image.Decode(bytes.NewReader(png))
	if err != nil {
		return fmt.Errorf("not an image: %w", err)
	}
	b := img.Bounds()
	total := b.Dx() * b.Dy()
	if total == 0 {
		return fmt.Errorf("an empty image (%dx%d)", b.Dx(), b.Dy())
	}
	counts := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	background := 0
	for _, n := range counts {
		background = max(background, n)
	}
	drawn := total - background
	if float64(drawn) < minDrawnFraction*float64(total) || len(counts) < minColours {
		return fmt.Errorf("blank: %d of %d pixels off the background, %d colours", drawn, total, len(counts))
	}
	return nil
}
