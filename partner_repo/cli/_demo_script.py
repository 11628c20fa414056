"""The conversation ``partner-repo demo`` records: a traveller planning an autumn week in Kyoto.

Plain data, one (user, assistant) pair per turn, long enough (52 turns, 104 messages) for several count
rolls and a final idle roll.
"""

from __future__ import annotations

TURNS: tuple[tuple[str, str], ...] = (
    (
        "Hi! I'm planning a week in Kyoto this autumn and could use some help.",
        "Happily. Autumn is a lovely time there. Do you already have dates in mind?",
    ),
    (
        "I was thinking of the second half of November.",
        "Good choice: that is usually when the maple leaves peak. It is also the busiest "
        "season, so book early.",
    ),
    (
        "How early is early?",
        "For a hotel in a central area, three to four months ahead. Popular ryokan fill up even sooner.",
    ),
    (
        "I'd love to stay in a ryokan for at least a couple of nights.",
        "Then consider two nights in a ryokan and the rest in a hotel; ryokan dinners "
        "are wonderful but long.",
    ),
    (
        "Which area is best to stay in?",
        "Around Shijo and Karasuma: central, close to Nishiki Market, and with good subway and bus links.",
    ),
    (
        "What about Gion?",
        "Gion is beautiful in the evening, but hotels there cost more. It is a short walk from Shijo anyway.",
    ),
    (
        "Okay, Shijo for the hotel then. How do I get there from the airport?",
        "From Kansai Airport, the Haruka express goes straight to Kyoto Station in about 75 minutes.",
    ),
    (
        "Is the Japan Rail Pass worth it for this trip?",
        "For one week mostly in Kyoto, probably not. An ICOCA card for local trains and buses is simpler.",
    ),
    (
        "What's an ICOCA card?",
        "A rechargeable travel card. You tap it on trains, buses and even in convenience stores.",
    ),
    (
        "Great. I also want to see the famous temples.",
        "Kiyomizu-dera, Kinkaku-ji and Fushimi Inari are the classics. Go early in the "
        "morning to avoid crowds.",
    ),
    ("How early?", "Fushimi Inari is open all night, so 7 am is ideal. Kiyomizu-dera opens at 6 am."),
    (
        "Is it hard to climb Fushimi Inari?",
        "The full loop takes two to three hours uphill, but the lower gates are beautiful and easy.",
    ),
    (
        "I'll do the lower part, then. What about Arashiyama?",
        "The bamboo grove is best at sunrise. Combine it with Tenryu-ji garden and a walk along the river.",
    ),
    (
        "Can I do Arashiyama and Kinkaku-ji on the same day?",
        "Yes, they are both in the west of the city. Take a bus between them or a short taxi ride.",
    ),
    (
        "Do taxis in Kyoto take cards?",
        "Most do now, and many accept IC cards too. Doors open automatically, so don't pull them.",
    ),
    (
        "Ha, good to know. Now, food! I'm vegetarian.",
        "Kyoto is the best city in Japan for that: shojin ryori, the Buddhist temple "
        "cuisine, is fully vegetarian.",
    ),
    (
        "Where can I try shojin ryori?",
        "Several temples in Arashiyama and Daitoku-ji serve it at lunch. Reserve a day or two ahead.",
    ),
    (
        "And for everyday meals?",
        "Tofu dishes, yuba, vegetable tempura and soba. Ask about dashi: broths are often made with fish.",
    ),
    (
        "How do I ask that in Japanese?",
        "You can say: katsuobushi wa haitte imasu ka? It means: does it contain bonito flakes?",
    ),
    (
        "I'll write that down. Is Nishiki Market good for vegetarians?",
        "Yes: pickles, sesame sweets, matcha treats and soy milk doughnuts. Go before noon, it gets crowded.",
    ),
    (
        "What's the etiquette for eating while walking?",
        "In Kyoto it's frowned upon. Eat at the stall where you bought the food, then move on.",
    ),
    (
        "Noted. How much cash should I carry?",
        "Cards are widely accepted, but temples, small shops and shrines often want cash. Keep some on you.",
    ),
    (
        "Can I withdraw cash with my foreign card?",
        "Yes, at 7-Eleven ATMs and post offices. They have English menus.",
    ),
    (
        "What's the weather like in late November?",
        "Days around 12 to 15 degrees, cold mornings near 5. Layers and comfortable walking shoes.",
    ),
    ("Will I need an umbrella?", "A small folding one. Late November is mostly dry, but showers happen."),
    (
        "I'm also thinking about a day trip. Nara or Osaka?",
        "Nara if you like temples and the friendly deer; Osaka for street food and nightlife.",
    ),
    (
        "I think Nara. How long does it take?",
        "About 45 minutes on the Kintetsu line from Kyoto Station. Half a day covers the main sights.",
    ),
    (
        "Are the deer really that friendly?",
        "They bow for crackers! Hold the crackers out of sight, though, or they will nibble your map.",
    ),
    (
        "Lol. And Todai-ji is there, right?",
        "Yes, with its giant bronze Buddha. The hall is one of the largest wooden buildings in the world.",
    ),
    (
        "Let's talk about the ryokan. What should I know about staying in one?",
        "You'll get a yukata robe, sleep on futons, and dinner is often served in your room.",
    ),
    (
        "And the baths?",
        "Shared baths are separated by gender. Wash and rinse at the showers before getting into the water.",
    ),
    (
        "I have a small tattoo. Is that a problem?",
        "Some baths refuse tattoos. Ask the ryokan, or book a room with a private bath to be safe.",
    ),
    (
        "Good idea, I'll ask for a private bath. What about tipping?",
        "No tipping in Japan, ryokan included. Excellent service is simply expected.",
    ),
    (
        "How do I book a ryokan?",
        "Through the usual booking sites or directly on the ryokan's website; many now have English pages.",
    ),
    (
        "Can you suggest a budget for the whole week?",
        "Roughly: hotel 5 nights, ryokan 2 nights with dinner, food, transport and entry "
        "fees. Say 1,800 euros.",
    ),
    (
        "That's a bit more than I hoped. Where can I save?",
        "Pick a business hotel instead of a boutique one, and eat lunch sets, which are "
        "cheaper than dinners.",
    ),
    (
        "Are temple entry fees expensive?",
        "Usually 400 to 1,000 yen each. Many shrines, including Fushimi Inari, are free.",
    ),
    (
        "Is it worth getting a guide for a day?",
        "For Gion and the tea ceremony, a local guide adds a lot of context. Elsewhere, "
        "signs are in English.",
    ),
    (
        "Tell me about the tea ceremony.",
        "It's a slow, quiet ritual of preparing matcha. Several tea houses in Gion offer 45-minute sessions.",
    ),
    (
        "Do I need to know the etiquette beforehand?",
        "The host explains everything. Just bow, turn the bowl before drinking, and compliment the tea.",
    ),
    (
        "Lovely. What about evening plans?",
        "A walk through Pontocho alley, dinner by the Kamo river, and the illuminated temples in autumn.",
    ),
    (
        "Illuminated temples?",
        "In November, temples like Eikan-do and Kodai-ji light up their maples at night. It's magical.",
    ),
    (
        "I want to see that. Which one is best?",
        "Eikan-do is famous for its reflections in the pond, but it's crowded. Kodai-ji is calmer.",
    ),
    (
        "Should I book tickets for those?",
        "Most sell tickets at the gate. Arrive at opening, around 5:30 pm, to beat the queues.",
    ),
    ("Do I need a SIM card?", "An eSIM with data is easiest; you'll want maps and translation on the go."),
    (
        "Which translation app works best?",
        "Any app with camera translation helps a lot with menus and signs.",
    ),
    (
        "Okay, I think I have a good picture. Can you recap the plan?",
        "Arrive at Kansai, Haruka to Kyoto, hotel near Shijo, temples early, Nara day "
        "trip, ryokan at the end.",
    ),
    (
        "Perfect. I'll start booking the hotel tonight.",
        "Great. Book refundable if you can, in case you adjust the dates later.",
    ),
    (
        "One last thing: any souvenir ideas?",
        "Matcha from Uji, handmade fans, yatsuhashi sweets and a goshuin book for temple stamps.",
    ),
    (
        "What's a goshuin book?",
        "A small book where temples write and stamp their calligraphy for you, usually for 300 to 500 yen.",
    ),
    (
        "That sounds like a perfect souvenir. Thank you so much!",
        "You're welcome! Have a wonderful time in Kyoto, and enjoy the maple leaves.",
    ),
    ("I'll tell you how it went when I'm back.", "Please do, I'd love to hear about it. Safe travels!"),
)
