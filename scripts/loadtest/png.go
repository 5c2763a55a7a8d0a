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
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	const (
		W, left, right, top, rowH, axisH = 1000, 20, 20, 40, 90, 40
		binsPerDecade                    = 25
	)
	H := top + rowH*len(labels) + axisH
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	plotW := W - left - right
	xOf := func(v float64) int {
		return left + int(float64(plotW)*(math.Log10(v)-dlo)/(dhi-dlo))
	}
	text(img, left, 10, "latency histogram per class (log time axis; red: p50, blue: p99)", color.RGBA{0, 0, 0, 255}, 2)
	nb := int(dhi-dlo) * binsPerDecade
	for row, l := range labels {
		vs := slices.Clone(data[l])
		slices.Sort(vs)
		bins := make([]int, nb)
		for _, v := range vs {
			if v <= 0 {
				continue
			}
			b := int((math.Log10(v) - dlo) * binsPerDecade)
			bins[max(0, min(b, nb-1))]++
		}
		peak := slices.Max(bins)
		y0 := top + row*rowH
		base := y0 + rowH - 6
		fill(img, image.Rect(left, base, W-right, base+1), color.RGBA{160, 160, 160, 255})
		for b, n := range bins {
			if n == 0 {
				continue
			}
			x0 := left + b*plotW/nb
			x1 := left + (b+1)*plotW/nb - 1
			h := max(1, n*(rowH-30)/peak)
			fill(img, image.Rect(x0, base-h, max(x0+1, x1), base), color.RGBA{90, 120, 90, 255})
		}
		p := func(q float64) float64 { return vs[max(0, min(len(vs)-1, int(math.Ceil(q*float64(len(vs))))-1))] }
		p50, p99 := p(0.5), p(0.99)
		fill(img, image.Rect(xOf(p50), y0+22, xOf(p50)+2, base), color.RGBA{210, 30, 30, 255})
		fill(img, image.Rect(xOf(p99), y0+22, xOf(p99)+2, base), color.RGBA{30, 60, 210, 255})
		text(img, left, y0+4, fmt.Sprintf("%s   n=%d  p50=%.3fms  p99=%.3fms", strings.ToLower(l), len(vs), p50, p99),
			color.RGBA{0, 0, 0, 255}, 2)
	}
	ay := top + rowH*len(labels)
	for d := dlo; d <= dhi; d++ {
		x := xOf(math.Pow(10, d))
		fill(img, image.Rect(x, top, x+1, ay+6), color.RGBA{210, 210, 210, 255})
		lab := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", math.Pow(10, d)), "0"), ".") + "ms"
		text(img, max(0, min(x-len(lab)*6, W-len(lab)*12)), ay+12, lab, color.RGBA{0, 0, 0, 255}, 2)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
