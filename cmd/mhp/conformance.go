package main

import "context"

func (a *app) conformanceCmd(ctx context.Context, args []string) int { return exitUsage }
