#!/usr/bin/env node
// tollgate runs its TypeScript sources directly on Node 24 (type stripping); no build step.
import '../src/cli/main.ts';
