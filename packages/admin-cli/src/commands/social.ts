import type { Command } from '../command';

export const socialCommands: Command[] = [];
