import type { Command } from '../command';

export const monitorCommands: Command[] = [];
