package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stackpilot/stackpilot/dev/internal/browser"
)

// firstPaint is the time from the start of the navigation to the fleet
// page until its table shows its first page of rows, in ms, measured by
// the page's own clock (performance.now) at the first animation frame
// that has them: what a user waits for after pressing Enter, with the
// assets in the browser's cache after the first load.
const firstPaint = `new Promise((resolve) => {
	const check = () => {
		if (document.querySelectorAll("#stacks tbody tr").length >= 50) resolve(performance.now());
		else requestAnimationFrame(check);
	};
	check();
})`

// measurePaint signs a headless Chromium in with a sign-in code for c's
// token and loads the fleet page samples times, printing the median and
// the slowest first paint.
func measurePaint(ctx context.Context, c *client, samples int) error {
	path, err := browser.Chromium()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-dashboard-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, browser.AllocatorOptions(path, dir)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		return fmt.Errorf("starting %s: %w", path, err)
	}

	code, err := c.signInCode(ctx)
	if err != nil {
		return err
	}
	step, cancel := context.WithTimeout(tab, 5*time.Minute)
	defer cancel()
	if err := chromedp.Do(step, chromedp.Navigate(c.base+"/#code="+code)); err != nil {
		return err
	}
	if _, err := chromedp.Run(step, chromedp.Evaluate[float64](firstPaint, chromedp.EvalAwaitPromise)); err != nil {
		return fmt.Errorf("signing in: %w", err)
	}
	var times []time.Duration
	for range samples {
		if err := chromedp.Do(step, chromedp.Reload()); err != nil {
			return err
		}
		ms, err := chromedp.Run(step, chromedp.Evaluate[float64](firstPaint, chromedp.EvalAwaitPromise))
		if err != nil {
			return err
		}
		times = append(times, time.Duration(ms*float64(time.Millisecond)))
	}
	slices.Sort(times)
	fmt.Printf("%-32s %10s %10s\n", "fleet page first paint (Chromium)", times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	return nil
}
