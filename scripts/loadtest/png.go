package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"slices"
	"strings"
)

// Layout of the histogram image, in pixels.
const (
	pngW, pngLeft, pngRight, pngTop, pngRowH, pngAxisH = 1000, 20, 20, 40, 90, 40
	binsPerDecade                                      = 25
)

// histogram is the image being drawn: its decades on a log time axis.
type histogram struct {
	img      *image.RGBA
	dlo, dhi float64 // log10 of the axis ends, in ms
}

func (h *histogram) plotW() int { return pngW - pngLeft - pngRight }

func (h *histogram) xOf(v float64) int {
	return pngLeft + int(float64(h.plotW())*(math.Log10(v)-h.dlo)/(h.dhi-h.dlo))
}

// WriteHistogramPNG draws one latency histogram per class, stacked, on a
// shared logarithmic time axis, with the p50 (red) and p99 (blue) marked.
// Plain image/png and a built-in 5×7 font: no plotting dependency.
func WriteHistogramPNG(path string, order []string, data map[string][]float64) error {
	var labels []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range order {
		if len(data[l]) == 0 {
			continue
		}
		labels = append(labels, l)
		for _, v := range data[l] {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if len(labels) == 0 {
		return fmt.Errorf("no latencies to draw")
	}
	h := &histogram{dlo: math.Floor(math.Log10(lo)), dhi: math.Ceil(math.Log10(hi))}
	if h.dhi <= h.dlo {
		h.dhi = h.dlo + 1
	}
	h.img = image.NewRGBA(image.Rect(0, 0, pngW, pngTop+pngRowH*len(labels)+pngAxisH))
	fill(h.img, h.img.Bounds(), color.RGBA{255, 255, 255, 255})
	text(h.img, pngLeft, 10, "latency histogram per class (log time axis; red: p50, blue: p99)", color.RGBA{0, 0, 0, 255}, 2)
	for row, l := range labels {
		h.row(row, l, data[l])
	}
	h.axis(pngTop + pngRowH*len(labels))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, h.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// row draws the histogram of one class with its p50 and p99.
func (h *histogram) row(row int, label string, values []float64) {
	nb := int(h.dhi-h.dlo) * binsPerDecade
	vs := slices.Clone(values)
	slices.Sort(vs)
	bins := make([]int, nb)
	for _, v := range vs {
		if v <= 0 {
			continue
		}
		b := int((math.Log10(v) - h.dlo) * binsPerDecade)
		bins[max(0, min(b, nb-1))]++
	}
	peak := slices.Max(bins)
	y0 := pngTop + row*pngRowH
	base := y0 + pngRowH - 6
	fill(h.img, image.Rect(pngLeft, base, pngW-pngRight, base+1), color.RGBA{160, 160, 160, 255})
	for b, n := range bins {
		if n == 0 {
			continue
		}
		x0 := pngLeft + b*h.plotW()/nb
		x1 := pngLeft + (b+1)*h.plotW()/nb - 1
		bh := max(1, n*(pngRowH-30)/peak)
		fill(h.img, image.Rect(x0, base-bh, max(x0+1, x1), base), color.RGBA{90, 120, 90, 255})
	}
	p := func(q float64) float64 { return vs[max(0, min(len(vs)-1, int(math.Ceil(q*float64(len(vs))))-1))] }
	p50, p99 := p(0.5), p(0.99)
	fill(h.img, image.Rect(h.xOf(p50), y0+22, h.xOf(p50)+2, base), color.RGBA{210, 30, 30, 255})
	fill(h.img, image.Rect(h.xOf(p99), y0+22, h.xOf(p99)+2, base), color.RGBA{30, 60, 210, 255})
	text(h.img, pngLeft, y0+4, fmt.Sprintf("%s   n=%d  p50=%.3fms  p99=%.3fms", strings.ToLower(label), len(vs), p50, p99),
		color.RGBA{0, 0, 0, 255}, 2)
}

// axis draws the decade lines and their labels below the rows at ay.
func (h *histogram) axis(ay int) {
	for d := h.dlo; d <= h.dhi; d++ {
		x := h.xOf(math.Pow(10, d))
		fill(h.img, image.Rect(x, pngTop, x+1, ay+6), color.RGBA{210, 210, 210, 255})
		lab := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", math.Pow(10, d)), "0"), ".") + "ms"
		text(h.img, max(0, min(x-len(lab)*6, pngW-len(lab)*12)), ay+12, lab, color.RGBA{0, 0, 0, 255}, 2)
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// text draws s with the 5×7 font at scale.
func text(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, ch := range strings.ToLower(s) {
		if g, ok := font[ch]; ok {
			for row, line := range g {
				for col, px := range line {
					if px == '#' {
						fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
					}
				}
			}
		}
		x += 6 * scale
	}
}

var font = map[rune][7]string{
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	'a': {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"},
	'b': {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "####."},
	'c': {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."},
	'd': {"....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"},
	'e': {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."},
	'f': {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."},
	'g': {".....", ".####", "#...#", "#...#", ".####", "....#", ".###."},
	'h': {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"},
	'i': {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."},
	'j': {"...#.", ".....", "..##.", "...#.", "...#.", "#..#.", ".##.."},
	'k': {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."},
	'l': {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'm': {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"},
	'n': {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"},
	'o': {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."},
	'p': {".....", ".....", "####.", "#...#", "####.", "#....", "#...."},
	'q': {".....", ".....", ".##.#", "#..##", ".####", "....#", "....#"},
	'r': {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."},
	's': {".....", ".....", ".###.", "#....", ".###.", "....#", "####."},
	't': {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."},
	'u': {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"},
	'v': {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'w': {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."},
	'x': {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"},
	'y': {".....", ".....", "#...#", "#...#", ".####", "....#", ".###."},
	'z': {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"},
	':': {".....", "..#..", "..#..", ".....", "..#..", "..#..", "....."},
	'.': {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'+': {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."},
	'(': {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."},
	')': {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."},
	'/': {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."},
	'%': {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"},
	',': {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."},
	';': {".....", "..#..", "..#..", ".....", "..#..", "..#..", ".#..."},
}
