export * from './types';
export { encodeCursor, decodeCursor, encodeKeyset, decodeKeyset } from './cursor';
export {
  createLocalSource,
  createSocialUser,
  createSocialTweet,
  deleteSocialTweet,
  SocialInputError,
  TWEET_MAX_LENGTH,
  USER_NAME_MAX_LENGTH,
  USER_DESCRIPTION_MAX_LENGTH,
  type SocialUserInput,
  type SocialTweetInput,
} from './local';
export * from './x';
export {
  createSocialSource,
  requireXToken,
  socialEnv,
  xPriceEnv,
  xPricesFromEnv,
  type SocialSourceConfig,
  type SocialSourceDeps,
} from './factory';
export {
  fitRuleParts,
  rulePartsLength,
  splitRuleParts,
  upstreamRuleKey,
  upstreamRuleParts,
  withRuleParts,
  type MonitorRuleColumns,
} from './upstreamRules';
