// Package sketch holds slide's quantile sketches: one small interface
// (Sketch) over DDSketch (DataDog/sketches-go, 1% relative accuracy by
// default) and HDR (HdrHistogram/hdrhistogram-go), and Bins, the invertible
// bucket counts the window ring keeps per slot.
//
// Design notes, the measured cost model and the accuracy guarantee follow in
// the next revision of this comment.
package sketch
